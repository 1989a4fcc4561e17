//! Checks across the attribute and the function: names, versions, retry parameters, events,
//! and the names of the generated types against the signature's.

use std::collections::HashSet;

use proc_macro2::Span;
use syn::{
    FnArg, GenericArgument, Ident, ItemFn, LitStr, Path, PathArguments, ReturnType, Type,
    TypeParamBound,
};

use crate::ast::{Kind, camel_case, event_type};
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

/// Checks that the types the macro generates (`ident`, and for a workflow one type per event)
/// take no name the function's signature (or an event payload) already uses: the generated
/// unit struct would collide with the user's type (E0428, E0255) or shadow a glob import of it,
/// and the signature would then name the generated type. `named` tells whether `ident` came
/// from `type_name = ...`. Returns whether the names are clear, so that the fallback emits the
/// generated types only then.
///
/// A name collides when it starts a path (`Charge`, `Charge::Id`, `Vec<Charge>`), which is
/// resolved in the function's scope; `models::Charge` does not, and is not reported.
pub(crate) fn type_names(
    cx: &Ctxt,
    kind: Kind,
    item: &ItemFn,
    ident: &Ident,
    named: bool,
    events: &[EventAttr],
) -> bool {
    let noun = kind.noun();
    let suggestion = format!(
        "{ident}{}",
        match kind {
            Kind::Task => "Task",
            Kind::Workflow => "Workflow",
        }
    );
    if named && *ident == item.sig.ident {
        cx.error_spanned_by(
            ident,
            format!(
                "`type_name = {ident}` is the function's own name: the generated type is a unit struct, which is also a value, so the two would collide; choose a type name, e.g. `type_name = {}`",
                camel_case(&ident.to_string())
            ),
        );
        return false;
    }
    let mut used = Vec::new();
    for arg in &item.sig.inputs {
        if let FnArg::Typed(arg) = arg {
            scope_names(&arg.ty, &mut used);
        }
    }
    if let ReturnType::Type(_, ty) = &item.sig.output {
        scope_names(ty, &mut used);
    }
    for event in events {
        scope_names(&event.payload, &mut used);
    }
    let rename = if named {
        format!("choose another `type_name`, e.g. `type_name = {suggestion}`")
    } else {
        format!(
            "name the generated type with the `type_name` argument: `#[aiki::{noun}(type_name = {suggestion}, ...)]`"
        )
    };
    let origin = if named {
        "its `type_name`".to_owned()
    } else {
        "the function's name in UpperCamelCase".to_owned()
    };
    let generated = std::iter::once((ident.clone(), None))
        .chain(events.iter().map(|event| {
            let marker = event_type(ident, &event.ident);
            (marker, Some(&event.ident))
        }))
        .collect::<Vec<_>>();
    let mut clear = true;
    for (generated, event) in &generated {
        let Some(collision) = used.iter().find(|used| **used == generated) else {
            continue;
        };
        clear = false;
        let message = match event {
            None => format!(
                "`#[aiki::{noun}]` generates a type named `{generated}` ({origin}), which collides with this `{collision}`; {rename}"
            ),
            Some(event) => format!(
                "`#[aiki::{noun}]` generates a type named `{generated}` for the event `{event}` (the workflow's type name, then the event's), which collides with this `{collision}`; {rename}, or rename the event"
            ),
        };
        cx.error_spanned_by(collision, message);
    }
    clear
}

/// The identifiers starting the paths of a type, which the function's scope resolves: `Charge`
/// in `Charge`, `Vec<Charge>` and `Charge::Id`, not in `models::Charge` or `::charge::Charge`.
fn scope_names<'a>(ty: &'a Type, names: &mut Vec<&'a Ident>) {
    match ty {
        Type::Path(path) => {
            if let Some(qself) = &path.qself {
                scope_names(&qself.ty, names);
            }
            path_names(&path.path, names);
        }
        Type::Reference(inner) => scope_names(&inner.elem, names),
        Type::Slice(inner) => scope_names(&inner.elem, names),
        Type::Array(inner) => scope_names(&inner.elem, names),
        Type::Ptr(inner) => scope_names(&inner.elem, names),
        Type::Paren(inner) => scope_names(&inner.elem, names),
        Type::Group(inner) => scope_names(&inner.elem, names),
        Type::Tuple(tuple) => tuple.elems.iter().for_each(|ty| scope_names(ty, names)),
        Type::ImplTrait(bounds) => bound_names(bounds.bounds.iter(), names),
        Type::TraitObject(bounds) => bound_names(bounds.bounds.iter(), names),
        Type::BareFn(function) => {
            for input in &function.inputs {
                scope_names(&input.ty, names);
            }
            if let ReturnType::Type(_, ty) = &function.output {
                scope_names(ty, names);
            }
        }
        _ => {}
    }
}

fn path_names<'a>(path: &'a Path, names: &mut Vec<&'a Ident>) {
    if path.leading_colon.is_none()
        && let Some(first) = path.segments.first()
    {
        names.push(&first.ident);
    }
    for segment in &path.segments {
        match &segment.arguments {
            PathArguments::AngleBracketed(arguments) => {
                for argument in &arguments.args {
                    match argument {
                        GenericArgument::Type(ty) => scope_names(ty, names),
                        GenericArgument::AssocType(assoc) => scope_names(&assoc.ty, names),
                        GenericArgument::Constraint(constraint) => {
                            bound_names(constraint.bounds.iter(), names);
                        }
                        _ => {}
                    }
                }
            }
            PathArguments::Parenthesized(arguments) => {
                arguments
                    .inputs
                    .iter()
                    .for_each(|ty| scope_names(ty, names));
                if let ReturnType::Type(_, ty) = &arguments.output {
                    scope_names(ty, names);
                }
            }
            PathArguments::None => {}
        }
    }
}

fn bound_names<'a>(bounds: impl Iterator<Item = &'a TypeParamBound>, names: &mut Vec<&'a Ident>) {
    for bound in bounds {
        if let TypeParamBound::Trait(bound) = bound {
            path_names(&bound.path, names);
        }
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

    fn collisions(
        kind: Kind,
        item: ItemFn,
        type_name: Option<Ident>,
        events: &[EventAttr],
    ) -> (bool, Vec<String>) {
        let cx = Ctxt::new();
        let ident = crate::ast::type_ident(&cx, &item, type_name.as_ref()).unwrap();
        let clear = type_names(&cx, kind, &item, &ident, type_name.is_some(), events);
        let errors = match cx.check() {
            Ok(()) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        };
        (clear, errors)
    }

    #[test]
    fn reports_a_generated_type_named_like_a_type_of_the_signature() {
        let (clear, errors) = collisions(
            Kind::Task,
            syn::parse_quote! {
                async fn charge(c: Charge) -> Result<Vec<Charge>, TaskError> {}
            },
            None,
            &[],
        );
        assert!(!clear);
        assert_eq!(
            errors,
            [
                "`#[aiki::task]` generates a type named `Charge` (the function's name in UpperCamelCase), which collides with this `Charge`; name the generated type with the `type_name` argument: `#[aiki::task(type_name = ChargeTask, ...)]`"
            ],
            "one error, at the first use"
        );
        for item in [
            syn::parse_quote! { async fn charge(c: &[Option<Charge>]) -> Result<(), E> {} },
            syn::parse_quote! { async fn charge(c: Charge::Input) -> Result<(), E> {} },
            syn::parse_quote! { async fn charge(c: C) -> Result<Box<dyn Fn(Charge)>, E> {} },
            syn::parse_quote! { async fn charge(c: <Charge as T>::Input) -> Result<(), E> {} },
        ] {
            let (clear, errors) = collisions(Kind::Task, item, None, &[]);
            assert!(!clear && errors.len() == 1, "{errors:?}");
        }
    }

    #[test]
    fn a_path_through_a_module_or_a_renamed_type_is_clear() {
        for item in [
            syn::parse_quote! { async fn charge(c: models::Charge) -> Result<Receipt, E> {} },
            syn::parse_quote! { async fn charge(c: ::charge::Charge) -> Result<(), E> {} },
            syn::parse_quote! { async fn charge(c: Vec<u8>) -> Result<Charged, E> {} },
        ] {
            assert_eq!(collisions(Kind::Task, item, None, &[]), (true, Vec::new()));
        }
        let renamed = collisions(
            Kind::Task,
            syn::parse_quote! { async fn charge(c: Charge) -> Result<(), E> {} },
            Some(syn::parse_quote!(ChargeTask)),
            &[],
        );
        assert_eq!(renamed, (true, Vec::new()));
    }

    #[test]
    fn reports_a_chosen_type_name_and_an_event_type_that_collide() {
        let (_, errors) = collisions(
            Kind::Workflow,
            syn::parse_quote! { async fn order(run: &Run, o: Order) -> Result<(), E> {} },
            Some(syn::parse_quote!(Order)),
            &[],
        );
        assert_eq!(
            errors,
            [
                "`#[aiki::workflow]` generates a type named `Order` (its `type_name`), which collides with this `Order`; choose another `type_name`, e.g. `type_name = OrderWorkflow`"
            ]
        );

        let cx = Ctxt::new();
        let attrs = WorkflowAttrs::parse(&cx, quote!(events(shipped = OrderShipped)));
        cx.check().unwrap();
        let (clear, errors) = collisions(
            Kind::Workflow,
            syn::parse_quote! { async fn order(run: &Run) -> Result<(), E> {} },
            None,
            &attrs.events,
        );
        assert!(!clear);
        assert_eq!(
            errors,
            [
                "`#[aiki::workflow]` generates a type named `OrderShipped` for the event `shipped` (the workflow's type name, then the event's), which collides with this `OrderShipped`; name the generated type with the `type_name` argument: `#[aiki::workflow(type_name = OrderWorkflow, ...)]`, or rename the event"
            ]
        );

        let (clear, errors) = collisions(
            Kind::Task,
            syn::parse_quote! { async fn charge() -> Result<(), E> {} },
            Some(syn::parse_quote!(charge)),
            &[],
        );
        assert!(!clear);
        assert_eq!(
            errors,
            [
                "`type_name = charge` is the function's own name: the generated type is a unit struct, which is also a value, so the two would collide; choose a type name, e.g. `type_name = Charge`"
            ]
        );
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
