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
    /// `aiki_listen_url=URL` (percent-encoded): where to `LISTEN` for ready hints.
    pub(super) listen_url: Option<String>,
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
            Some(("listen_url", encoded)) => {
                let decoded = percent_encoding::percent_decode_str(encoded)
                    .decode_utf8()
                    .map_err(|_| {
                        "`aiki_listen_url` is not percent-encoded UTF-8 (encode the URL it \
                         names, e.g. `postgres%3A%2F%2Fhost%2Fdb`)"
                            .to_owned()
                    })?;
                found.listen_url = Some(decoded.into_owned());
            }
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
                     `aiki_schema=NAME`, `aiki_claim_clock=database|caller` and \
                     `aiki_listen_url=URL`)"
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
                listen_url: None,
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
        let (url, found) = take_aiki_parameters(
            "postgres://u@h:6432/db?aiki_listen_url=postgres%3A%2F%2Fu%40h%3A5432%2Fdb%3Fsslmode%3Drequire",
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h:6432/db");
        assert_eq!(
            found.listen_url.as_deref(),
            Some("postgres://u@h:5432/db?sslmode=require")
        );
    }

    #[test]
    fn unknown_parameters_and_values_are_named() {
        let error = take_aiki_parameters("postgres://u@h/db?aiki_claim_clock=server").unwrap_err();
        assert!(error.contains("aiki_claim_clock=server"), "{error}");
        assert!(error.contains("`database` or `caller`"), "{error}");
        let error = take_aiki_parameters("postgres://u@h/db?aiki_listen_url=%FF").unwrap_err();
        assert!(error.contains("percent-encoded UTF-8"), "{error}");
        let error = take_aiki_parameters("postgres://u@h/db?aiki_shema=x").unwrap_err();
        assert!(error.contains("`aiki_shema=x`"), "{error}");
        assert!(error.contains("aiki_schema=NAME"), "{error}");
    }
}
