//! Checks across the attribute and the function: names, versions, retry parameters, events.
//! (The generated types' names against the signature's: `collision`.)

use std::collections::HashSet;

use proc_macro2::Span;
use syn::LitStr;

use crate::ast::Kind;
use crate::attr::{EventAttr, Number, Retry, Strategy, TaskAttrs, WorkflowAttrs};
use crate::ctxt::Ctxt;

/// The longest retry delay the runtime accepts: ten years of 365 days, in ms (as
/// `aiki::RetryPolicy` checks it).
const MAX_DELAY_MS: f64 = 315_360_000_000.0;

/// Checks a task's attribute.
pub(crate) fn task(cx: &Ctxt, attrs: &TaskAttrs, fn_span: Span) {
    let misspelt = attrs.suggested.contains(&"name");
    name(cx, attrs.name.as_ref(), Kind::Task, fn_span, misspelt);
    if let Some(retry) = &attrs.retry {
        self::retry(cx, retry);
    }
}

/// Checks a workflow's attribute.
pub(crate) fn workflow(cx: &Ctxt, attrs: &WorkflowAttrs, fn_span: Span) {
    let misspelt = attrs.suggested.contains(&"name");
    name(cx, attrs.name.as_ref(), Kind::Workflow, fn_span, misspelt);
    match &attrs.version {
        None if attrs.suggested.contains(&"version") => {}
        None => cx.syn_error(syn::Error::new(
            fn_span,
            "`#[aiki::workflow]` needs a version: add `version = \"1.0.0\"`",
        )),
        Some(version) => {
            if let Err(problem) = well_formed_version(&version.value()) {
                cx.error_spanned_by(
                    version,
                    format!(
                        "malformed workflow version {:?}: {problem}; expected `MAJOR`, `MAJOR.MINOR` or `MAJOR.MINOR.PATCH` with an optional `-pre.release`, e.g. \"1.0.0\" or \"2.1.0-beta.1\"",
                        version.value()
                    ),
                );
            }
        }
    }
    events(cx, &attrs.events);
    if let Some(retry) = &attrs.retry {
        self::retry(cx, retry);
    }
}

/// Checks a name; a missing one is not reported when a misspelt key was already reported.
fn name(cx: &Ctxt, name: Option<&LitStr>, kind: Kind, fn_span: Span, misspelt: bool) {
    let noun = kind.noun();
    match name {
        None if misspelt => {}
        None => cx.syn_error(syn::Error::new(
            fn_span,
            format!(
                "`#[aiki::{noun}]` needs a durable name: add `name = \"...\"` (the name, not the function's path, identifies recorded {noun}s)"
            ),
        )),
        Some(name) => {
            if let Err(problem) = well_formed_name(&name.value()) {
                cx.error_spanned_by(name, format!("invalid {noun} name: {problem}"));
            }
        }
    }
}

/// A name is part of addresses (`name:hash`) and namespaces (`name@version`).
pub(crate) fn well_formed_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".to_owned());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| *c == ':' || *c == '@' || c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "it contains {bad:?}; names are part of addresses (`name:hash`) and namespaces (`name@version`), so `:`, `@` and whitespace are not allowed"
        ));
    }
    Ok(())
}

/// `MAJOR[.MINOR[.PATCH]][-PRE]`: numbers without leading zeros, pre-release identifiers of
/// ASCII letters, digits and `-`, separated by dots.
pub(crate) fn well_formed_version(version: &str) -> Result<(), String> {
    if version.is_empty() {
        return Err("the version is empty".to_owned());
    }
    let (core, pre) = match version.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (version, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    if numbers.len() > 3 {
        return Err("it has more than three numbers".to_owned());
    }
    for number in numbers {
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("`{number}` is not a number"));
        }
        if number.len() > 1 && number.starts_with('0') {
            return Err(format!("`{number}` has a leading zero"));
        }
    }
    if let Some(pre) = pre {
        for identifier in pre.split('.') {
            if identifier.is_empty()
                || !identifier
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Err(format!(
                    "the pre-release `{pre}` must be dot-separated identifiers of letters, digits and `-`"
                ));
            }
        }
    }
    Ok(())
}

fn events(cx: &Ctxt, events: &[EventAttr]) {
    let mut names = HashSet::new();
    let mut idents = HashSet::new();
    for event in events {
        let name = event_name(event);
        let span = event.name.as_ref().map_or(event.ident.span(), LitStr::span);
        if let Some(problem) = event
            .name
            .as_ref()
            .and_then(|n| well_formed_name(&n.value()).err())
        {
            cx.syn_error(syn::Error::new(
                span,
                format!("invalid event name: {problem}"),
            ));
        }
        if !names.insert(name.clone()) {
            cx.syn_error(syn::Error::new(
                span,
                format!("duplicate event `{name}` in `#[aiki::workflow]`: each event name is one queue, declare it once"),
            ));
        } else if !idents.insert(event.ident.to_string()) {
            cx.error_spanned_by(
                &event.ident,
                format!("duplicate event `{}` in `#[aiki::workflow]`: it names the wait method `run.events().{}()`", event.ident, event.ident),
            );
        }
    }
}

/// The event's durable name: the explicit `name = "..."` or the identifier.
pub(crate) fn event_name(event: &EventAttr) -> String {
    event
        .name
        .as_ref()
        .map_or_else(|| event.ident.to_string(), LitStr::value)
}

fn retry(cx: &Ctxt, retry: &Retry) {
    if retry.strategy == Strategy::Never {
        return;
    }
    let delay_key = match retry.strategy {
        Strategy::Fixed => "delay_ms",
        _ => "base_delay_ms",
    };
    for (key, value) in [
        ("max_attempts", &retry.max_attempts),
        (delay_key, &retry.delay_ms),
    ] {
        if value.is_none() {
            cx.syn_error(syn::Error::new(
                retry.span(),
                format!("`{}` retry needs `{key} = ...`", retry.ident),
            ));
        }
    }
    if let Some(n) = &retry.max_attempts
        && (!n.is_integer || n.value < 1.0 || n.value > f64::from(u32::MAX))
    {
        error(
            cx,
            n,
            "`max_attempts` must be a whole number of at least 1 (it counts the first attempt)",
        );
    }
    for (key, value) in [
        (delay_key, &retry.delay_ms),
        ("max_delay_ms", &retry.max_delay_ms),
    ] {
        if let Some(n) = value
            && (!n.is_integer || n.value < 1.0 || n.value > u64::MAX as f64)
        {
            error(
                cx,
                n,
                &format!("`{key}` must be a whole number of milliseconds greater than zero"),
            );
        } else if let Some(n) = value
            && n.value > MAX_DELAY_MS
        {
            error(
                cx,
                n,
                &format!(
                    "`{key}` must be at most ten years ({MAX_DELAY_MS} ms); use a shorter delay"
                ),
            );
        }
    }
    if let Some(n) = &retry.factor
        && !(n.value.is_finite() && n.value >= 1.0)
    {
        error(cx, n, "`factor` must be at least 1");
    }
    if let Some(n) = &retry.jitter
        && !(0.0..=1.0).contains(&n.value)
    {
        error(cx, n, "`jitter` must be within [0, 1]");
    }
}

fn error(cx: &Ctxt, number: &Number, message: &str) {
    cx.error_spanned_by(&number.tokens, message);
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn errors_of(args: proc_macro2::TokenStream) -> Vec<String> {
        let cx = Ctxt::new();
        let attrs = WorkflowAttrs::parse(&cx, args);
        workflow(&cx, &attrs, Span::call_site());
        match cx.check() {
            Ok(()) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn accepts_semver_like_versions() {
        for version in ["1", "1.0", "1.0.0", "0.10.2", "2.0.0-beta.1", "3-rc1"] {
            assert_eq!(well_formed_version(version), Ok(()), "{version}");
        }
        for version in [
            "",
            "v1",
            "1.",
            "01",
            "1.0.0.0",
            "1.0.0-",
            "1.0.0-a..b",
            "1 .0",
        ] {
            assert!(well_formed_version(version).is_err(), "{version}");
        }
    }

    #[test]
    fn refuses_names_that_break_addresses() {
        assert!(well_formed_name("charge-card").is_ok());
        assert!(well_formed_name("orders.v2").is_ok());
        for name in ["", "a:b", "a@b", "a b", "tab\t"] {
            assert!(well_formed_name(name).is_err(), "{name:?}");
        }
    }

    #[test]
    fn reports_all_problems_in_one_pass() {
        let errors = errors_of(quote!(
            name = "a:b",
            version = "1.x",
            events(paid = P, paid(name = "paid")),
            retry = jittered(
                max_attempts = 0,
                base_delay_ms = -1,
                factor = 0.5,
                jitter = 1.5
            )
        ));
        assert_eq!(errors.len(), 7, "{errors:#?}");
        assert!(errors[0].starts_with("invalid workflow name: it contains ':'"));
        assert!(errors[1].starts_with("malformed workflow version \"1.x\": `x` is not a number"));
        assert!(errors[2].starts_with("duplicate event `paid`"));
        assert!(errors[3].starts_with("`max_attempts` must be"));
        assert!(errors[4].starts_with("`base_delay_ms` must be"));
        assert!(errors[5].starts_with("`factor` must be at least 1"));
        assert!(errors[6].starts_with("`jitter` must be within [0, 1]"));
    }

    #[test]
    fn requires_name_version_and_retry_parameters() {
        let errors = errors_of(quote!(retry = fixed(max_attempts = 2)));
        assert_eq!(
            errors,
            [
                "`#[aiki::workflow]` needs a durable name: add `name = \"...\"` (the name, not the function's path, identifies recorded workflows)",
                "`#[aiki::workflow]` needs a version: add `version = \"1.0.0\"`",
                "`fixed` retry needs `delay_ms = ...`",
            ]
        );
    }
}
