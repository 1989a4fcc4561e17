//! Aiki's own parameters in a PostgreSQL URL (`aiki_schema=`, `aiki_claim_clock=`), split off
//! before the rest goes to the driver, which refuses parameters it does not know.

use super::ClaimClock;

/// The parameters of a URL that are Aiki's, not the driver's.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct AikiParameters {
    /// `aiki_schema=NAME`.
    pub(super) schema: Option<String>,
    /// `aiki_claim_clock=database|caller`.
    pub(super) claim_clock: Option<ClaimClock>,
}

/// Splits Aiki's parameters off a URL: the URL for the driver and what they say. A parameter
/// starting with `aiki_` that Aiki does not know, or a value it does not accept, is an error
/// naming it.
pub(super) fn take_aiki_parameters(url: &str) -> Result<(String, AikiParameters), String> {
    let mut found = AikiParameters::default();
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), found));
    };
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let Some(parameter) = pair.strip_prefix("aiki_") else {
            rest.push(pair);
            continue;
        };
        match parameter.split_once('=') {
            Some(("schema", name)) => found.schema = Some(name.to_owned()),
            Some(("claim_clock", clock)) => {
                found.claim_clock = Some(match clock {
                    "database" => ClaimClock::Database,
                    "caller" => ClaimClock::Caller,
                    other => {
                        return Err(format!(
                            "`aiki_claim_clock={other}`: the claim clock is `database` or \
                             `caller`"
                        ));
                    }
                })
            }
            _ => {
                return Err(format!(
                    "`aiki_{parameter}` is not a parameter Aiki knows (it knows \
                     `aiki_schema=NAME` and `aiki_claim_clock=database|caller`)"
                ));
            }
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aikis_parameters_are_split_off_the_drivers() {
        let (url, found) = take_aiki_parameters(
            "postgres://u@h/db?aiki_schema=runs_1&sslmode=disable&aiki_claim_clock=caller",
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h/db?sslmode=disable");
        assert_eq!(
            found,
            AikiParameters {
                schema: Some("runs_1".to_owned()),
                claim_clock: Some(ClaimClock::Caller),
            }
        );
        let (url, found) = take_aiki_parameters("postgres://u@h/db?aiki_schema=x").unwrap();
        assert_eq!(url, "postgres://u@h/db");
        assert_eq!(found.schema.as_deref(), Some("x"));
        assert_eq!(found.claim_clock, None);
        let (url, found) = take_aiki_parameters("postgres://u@h/db").unwrap();
        assert_eq!(url, "postgres://u@h/db");
        assert_eq!(found, AikiParameters::default());
        let (_, found) =
            take_aiki_parameters("postgres://u@h/db?aiki_claim_clock=database").unwrap();
        assert_eq!(found.claim_clock, Some(ClaimClock::Database));
    }

    #[test]
    fn unknown_parameters_and_values_are_named() {
        let error = take_aiki_parameters("postgres://u@h/db?aiki_claim_clock=server").unwrap_err();
        assert!(error.contains("aiki_claim_clock=server"), "{error}");
        assert!(error.contains("`database` or `caller`"), "{error}");
        let error = take_aiki_parameters("postgres://u@h/db?aiki_shema=x").unwrap_err();
        assert!(error.contains("`aiki_shema=x`"), "{error}");
        assert!(error.contains("aiki_schema=NAME"), "{error}");
    }
}
