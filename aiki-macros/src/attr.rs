//! Parsing of the attribute arguments: `#[aiki::task(name = "...", type_name = T, retry = ...)]`
//! and `#[aiki::workflow(name = "...", version = "...", type_name = T, events(...), retry = ...)]`.
//!
//! Every unknown or duplicate key is reported (with a suggestion for a likely typo) and parsing
//! goes on, so all mistakes show up in one build. Values are only parsed here; their ranges are
//! validated in `check`.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, ExprLit, ExprUnary, Ident, Lit, LitStr, Token, Type, UnOp};

use crate::ctxt::Ctxt;

/// The arguments of `#[aiki::task(...)]`.
#[derive(Default)]
pub(crate) struct TaskAttrs {
    pub(crate) name: Option<LitStr>,
    /// `type_name = ChargeTask`: the generated type's name, instead of the fn's in CamelCase.
    pub(crate) type_name: Option<Ident>,
    pub(crate) retry: Option<Retry>,
    /// Keys suggested for misspelt ones: not reported again as missing.
    pub(crate) suggested: Vec<&'static str>,
}

/// The arguments of `#[aiki::workflow(...)]`.
#[derive(Default)]
pub(crate) struct WorkflowAttrs {
    pub(crate) name: Option<LitStr>,
    pub(crate) version: Option<LitStr>,
    /// `type_name = OrderWorkflow`: the generated type's name, instead of the fn's in
    /// CamelCase; it also prefixes the event types.
    pub(crate) type_name: Option<Ident>,
    pub(crate) events: Vec<EventAttr>,
    pub(crate) retry: Option<Retry>,
    /// Keys suggested for misspelt ones: not reported again as missing.
    pub(crate) suggested: Vec<&'static str>,
}

/// One entry of `events(...)`: `ident = Payload`, `ident` (no payload) or
/// `ident(name = "...", payload = Payload)`.
pub(crate) struct EventAttr {
    pub(crate) ident: Ident,
    pub(crate) name: Option<LitStr>,
    pub(crate) payload: Type,
}

/// `retry = never | fixed(...) | exponential(...) | jittered(...)`.
pub(crate) struct Retry {
    pub(crate) strategy: Strategy,
    /// The strategy's name as written, for errors about missing parameters.
    pub(crate) ident: Ident,
    pub(crate) max_attempts: Option<Number>,
    /// `delay_ms` of `fixed`, `base_delay_ms` of the others.
    pub(crate) delay_ms: Option<Number>,
    pub(crate) factor: Option<Number>,
    pub(crate) max_delay_ms: Option<Number>,
    pub(crate) jitter: Option<Number>,
}

/// A retry strategy.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Strategy {
    Never,
    Fixed,
    Exponential,
    Jittered,
}

impl Strategy {
    const NAMES: &[&str] = &["never", "fixed", "exponential", "jittered"];

    fn from_name(name: &str) -> Option<Strategy> {
        Some(match name {
            "never" => Strategy::Never,
            "fixed" => Strategy::Fixed,
            "exponential" => Strategy::Exponential,
            "jittered" => Strategy::Jittered,
            _ => return None,
        })
    }

    /// The parameters the strategy accepts.
    pub(crate) fn keys(self) -> &'static [&'static str] {
        match self {
            Strategy::Never => &[],
            Strategy::Fixed => &["max_attempts", "delay_ms"],
            Strategy::Exponential => &["max_attempts", "base_delay_ms", "factor", "max_delay_ms"],
            Strategy::Jittered => &[
                "max_attempts",
                "base_delay_ms",
                "factor",
                "max_delay_ms",
                "jitter",
            ],
        }
    }
}

/// A numeric literal as written, possibly negative, keeping its tokens for spans.
pub(crate) struct Number {
    pub(crate) value: f64,
    pub(crate) is_integer: bool,
    pub(crate) tokens: TokenStream,
}

const TASK_KEYS: &[&str] = &["name", "type_name", "retry"];
const WORKFLOW_KEYS: &[&str] = &["name", "version", "type_name", "events", "retry"];
const EVENT_KEYS: &[&str] = &["name", "payload"];

impl TaskAttrs {
    /// Parses the attribute's arguments, recording every error in `cx`.
    pub(crate) fn parse(cx: &Ctxt, args: TokenStream) -> TaskAttrs {
        let mut attrs = TaskAttrs::default();
        let parser = syn::meta::parser(|meta| {
            let key = key_of(&meta);
            match key.as_str() {
                "name" => set(cx, &mut attrs.name, &meta, "task", parse_str(&meta)?),
                "type_name" => {
                    if let Some(value) = parse_type_name(cx, &meta, "task")? {
                        set(cx, &mut attrs.type_name, &meta, "task", value);
                    }
                }
                "retry" => set(cx, &mut attrs.retry, &meta, "task", parse_retry(cx, &meta)?),
                _ => attrs
                    .suggested
                    .extend(unknown_key(cx, &meta, "`#[aiki::task]`", TASK_KEYS)?),
            }
            Ok(())
        });
        if let Err(error) = parser.parse2(args) {
            cx.syn_error(error);
        }
        attrs
    }
}

impl WorkflowAttrs {
    /// Parses the attribute's arguments, recording every error in `cx`.
    pub(crate) fn parse(cx: &Ctxt, args: TokenStream) -> WorkflowAttrs {
        let mut attrs = WorkflowAttrs::default();
        let mut seen_events = false;
        let parser = syn::meta::parser(|meta| {
            let key = key_of(&meta);
            match key.as_str() {
                "name" => set(cx, &mut attrs.name, &meta, "workflow", parse_str(&meta)?),
                "version" => set(cx, &mut attrs.version, &meta, "workflow", parse_str(&meta)?),
                "type_name" => {
                    if let Some(value) = parse_type_name(cx, &meta, "workflow")? {
                        set(cx, &mut attrs.type_name, &meta, "workflow", value);
                    }
                }
                "retry" => set(
                    cx,
                    &mut attrs.retry,
                    &meta,
                    "workflow",
                    parse_retry(cx, &meta)?,
                ),
                "events" => {
                    if std::mem::replace(&mut seen_events, true) {
                        cx.error_spanned_by(
                            &meta.path,
                            "duplicate key `events` in `#[aiki::workflow]`; list all events in one `events(...)`",
                        );
                    }
                    meta.parse_nested_meta(|event| {
                        attrs.events.push(parse_event(cx, event)?);
                        Ok(())
                    })?;
                }
                _ => attrs.suggested.extend(unknown_key(
                    cx,
                    &meta,
                    "`#[aiki::workflow]`",
                    WORKFLOW_KEYS,
                )?),
            }
            Ok(())
        });
        if let Err(error) = parser.parse2(args) {
            cx.syn_error(error);
        }
        attrs
    }
}

fn key_of(meta: &ParseNestedMeta<'_>) -> String {
    meta.path
        .get_ident()
        .map(Ident::to_string)
        .unwrap_or_else(|| meta.path.to_token_stream().to_string())
}

/// Stores a value, reporting a duplicate key.
fn set<T>(cx: &Ctxt, slot: &mut Option<T>, meta: &ParseNestedMeta<'_>, what: &str, value: T) {
    if slot.is_some() {
        cx.error_spanned_by(
            &meta.path,
            format!("duplicate key `{}` in `#[aiki::{what}]`", key_of(meta)),
        );
    } else {
        *slot = Some(value);
    }
}

fn parse_str(meta: &ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    meta.value()?.parse()
}

/// `type_name = ChargeTask`: an identifier, written bare since it is code (the generated type,
/// which go-to-definition then finds here), unlike the durable `name = "..."`. A quoted name is
/// reported with the bare spelling, and read as it when it is an identifier, so that no other
/// error follows from it.
fn parse_type_name(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    what: &str,
) -> syn::Result<Option<Ident>> {
    let input = meta.value()?;
    if input.peek(LitStr) {
        let quoted: LitStr = input.parse()?;
        let bare = quoted.value();
        cx.error_spanned_by(
            &quoted,
            format!(
                "`type_name` in `#[aiki::{what}]` is the generated type's identifier, written without quotes: `type_name = {bare}`"
            ),
        );
        return Ok(quoted.parse::<Ident>().ok());
    }
    input.parse::<Ident>().map(Some).map_err(|error| {
        syn::Error::new(
            error.span(),
            format!(
                "expected the generated type's identifier after `type_name =` in `#[aiki::{what}]`, e.g. `type_name = ChargeTask`"
            ),
        )
    })
}

/// Reports an unknown key with the valid ones and a suggestion, and skips its value. Returns
/// the suggestion.
fn unknown_key(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    attribute: &str,
    expected: &[&'static str],
) -> syn::Result<Option<&'static str>> {
    let key = key_of(meta);
    cx.error_spanned_by(&meta.path, unknown_message(&key, attribute, expected));
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.input.parse::<proc_macro2::Group>()?;
    }
    Ok(closest(&key, expected))
}

/// `unknown key `verison` in `#[aiki::workflow]`; expected one of: name, version, ...; did you
/// mean `version`?`
pub(crate) fn unknown_message(key: &str, attribute: &str, expected: &[&str]) -> String {
    let mut message = format!(
        "unknown key `{key}` in {attribute}; expected one of: {}",
        expected.join(", ")
    );
    if let Some(close) = closest(key, expected) {
        message.push_str(&format!("; did you mean `{close}`?"));
    }
    message
}

/// The candidate within a small edit distance of `word`, if any.
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|candidate| (edit_distance(word, candidate), *candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance, with adjacent transpositions counting as one edit.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![(0..=b.len()).collect::<Vec<_>>(); a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

fn parse_event(cx: &Ctxt, meta: ParseNestedMeta<'_>) -> syn::Result<EventAttr> {
    let Some(ident) = meta.path.get_ident().cloned() else {
        return Err(meta.error(
            "expected an event like `payment_received = Payload`, `approved` (no payload) or `shipped(name = \"...\", payload = Payload)`",
        ));
    };
    let mut name = None;
    let mut payload = None;
    if meta.input.peek(Token![=]) {
        payload = Some(meta.value()?.parse::<Type>()?);
    } else if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|inner| {
            match key_of(&inner).as_str() {
                "name" => set(cx, &mut name, &inner, "workflow", parse_str(&inner)?),
                "payload" => set(
                    cx,
                    &mut payload,
                    &inner,
                    "workflow",
                    inner.value()?.parse::<Type>()?,
                ),
                _ => {
                    unknown_key(cx, &inner, "an event of `#[aiki::workflow]`", EVENT_KEYS)?;
                }
            }
            Ok(())
        })?;
    }
    let payload = payload.unwrap_or_else(|| syn::parse_quote_spanned!(ident.span()=> ()));
    Ok(EventAttr {
        ident,
        name,
        payload,
    })
}

fn parse_retry(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<Retry> {
    let input = meta.value()?;
    let ident: Ident = input.parse()?;
    let Some(strategy) = Strategy::from_name(&ident.to_string()) else {
        let mut message = format!(
            "unknown retry strategy `{ident}`; expected one of: {}",
            Strategy::NAMES.join(", ")
        );
        if let Some(close) = closest(&ident.to_string(), Strategy::NAMES) {
            message.push_str(&format!("; did you mean `{close}`?"));
        }
        cx.error_spanned_by(&ident, message);
        if input.peek(syn::token::Paren) {
            input.parse::<proc_macro2::Group>()?;
        }
        return Ok(Retry::new(Strategy::Never, ident));
    };
    let mut retry = Retry::new(strategy, ident);
    if input.peek(syn::token::Paren) {
        let group: proc_macro2::Group = input.parse()?;
        let context = format!("`retry = {}(...)`", retry.ident);
        let parser = syn::meta::parser(|param| {
            let key = key_of(&param);
            if !strategy.keys().contains(&key.as_str()) {
                return unknown_key(cx, &param, &context, strategy.keys()).map(drop);
            }
            let number = parse_number(&param)?;
            let slot = match key.as_str() {
                "max_attempts" => &mut retry.max_attempts,
                "delay_ms" | "base_delay_ms" => &mut retry.delay_ms,
                "factor" => &mut retry.factor,
                "max_delay_ms" => &mut retry.max_delay_ms,
                _ => &mut retry.jitter,
            };
            if slot.is_some() {
                cx.error_spanned_by(&param.path, format!("duplicate key `{key}` in {context}"));
            } else {
                *slot = Some(number);
            }
            Ok(())
        });
        parser.parse2(group.stream())?;
    }
    Ok(retry)
}

impl Retry {
    fn new(strategy: Strategy, ident: Ident) -> Retry {
        Retry {
            strategy,
            ident,
            max_attempts: None,
            delay_ms: None,
            factor: None,
            max_delay_ms: None,
            jitter: None,
        }
    }

    /// The span of the strategy's name.
    pub(crate) fn span(&self) -> Span {
        self.ident.span()
    }
}

fn parse_number(meta: &ParseNestedMeta<'_>) -> syn::Result<Number> {
    let expr: Expr = meta.value()?.parse()?;
    let tokens = expr.to_token_stream();
    let (negative, lit) = match &expr {
        Expr::Lit(ExprLit { lit, .. }) => (false, lit),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            Expr::Lit(ExprLit { lit, .. }) => (true, lit),
            _ => return Err(syn::Error::new_spanned(tokens, "expected a number literal")),
        },
        _ => return Err(syn::Error::new_spanned(tokens, "expected a number literal")),
    };
    let (value, is_integer) = match lit {
        Lit::Int(int) => (int.base10_parse::<f64>()?, true),
        Lit::Float(float) => (float.base10_parse::<f64>()?, false),
        _ => return Err(syn::Error::new_spanned(tokens, "expected a number literal")),
    };
    Ok(Number {
        value: if negative { -value } else { value },
        is_integer,
        tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn errors(cx: Ctxt) -> Vec<String> {
        match cx.check() {
            Ok(()) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn parses_a_full_workflow_attribute() {
        let cx = Ctxt::new();
        let attrs = WorkflowAttrs::parse(
            &cx,
            quote!(
                name = "order-processing",
                version = "1.0.0",
                events(
                    payment_received = Payment,
                    approved,
                    shipped(name = "order.shipped", payload = Shipment)
                ),
                retry = exponential(
                    max_attempts = 3,
                    base_delay_ms = 1000,
                    factor = 3,
                    max_delay_ms = 60000
                )
            ),
        );
        assert!(errors(cx).is_empty());
        assert_eq!(attrs.name.unwrap().value(), "order-processing");
        assert_eq!(attrs.version.unwrap().value(), "1.0.0");
        let events: Vec<_> = attrs.events.iter().map(|e| e.ident.to_string()).collect();
        assert_eq!(events, ["payment_received", "approved", "shipped"]);
        assert_eq!(attrs.events[1].payload, syn::parse_quote!(()));
        assert_eq!(
            attrs.events[2].name.as_ref().unwrap().value(),
            "order.shipped"
        );
        let retry = attrs.retry.unwrap();
        assert_eq!(retry.strategy, Strategy::Exponential);
        assert_eq!(retry.max_attempts.unwrap().value, 3.0);
        assert_eq!(retry.factor.unwrap().value, 3.0);
        assert_eq!(retry.max_delay_ms.unwrap().value, 60000.0);
    }

    #[test]
    fn reports_every_unknown_and_duplicate_key() {
        let cx = Ctxt::new();
        WorkflowAttrs::parse(
            &cx,
            quote!(name = "a", verison = "1", name = "b", colour(x)),
        );
        assert_eq!(
            errors(cx),
            [
                "unknown key `verison` in `#[aiki::workflow]`; expected one of: name, version, type_name, events, retry; did you mean `version`?",
                "duplicate key `name` in `#[aiki::workflow]`",
                "unknown key `colour` in `#[aiki::workflow]`; expected one of: name, version, type_name, events, retry",
            ]
        );
    }

    #[test]
    fn parses_negative_numbers_and_reports_unknown_strategies() {
        let cx = Ctxt::new();
        let attrs = TaskAttrs::parse(&cx, quote!(retry = fixed(max_attempts = 2, delay_ms = -5)));
        assert!(errors(cx).is_empty());
        assert_eq!(attrs.retry.unwrap().delay_ms.unwrap().value, -5.0);

        let cx = Ctxt::new();
        TaskAttrs::parse(&cx, quote!(retry = exponentail(max_attempts = 2)));
        assert_eq!(
            errors(cx),
            [
                "unknown retry strategy `exponentail`; expected one of: never, fixed, exponential, jittered; did you mean `exponential`?"
            ]
        );
    }

    #[test]
    fn parses_the_type_name_of_both_macros() {
        let cx = Ctxt::new();
        let task = TaskAttrs::parse(&cx, quote!(name = "charge", type_name = ChargeTask));
        let workflow = WorkflowAttrs::parse(
            &cx,
            quote!(name = "order", version = "1", type_name = OrderFlow),
        );
        assert!(errors(cx).is_empty());
        assert_eq!(task.type_name.unwrap(), "ChargeTask");
        assert_eq!(workflow.type_name.unwrap(), "OrderFlow");
    }

    #[test]
    fn reports_a_quoted_or_missing_type_name() {
        let cx = Ctxt::new();
        let attrs = TaskAttrs::parse(&cx, quote!(type_name = "ChargeTask", name = "charge"));
        assert_eq!(
            errors(cx),
            [
                "`type_name` in `#[aiki::task]` is the generated type's identifier, written without quotes: `type_name = ChargeTask`"
            ]
        );
        assert_eq!(
            attrs.type_name.unwrap(),
            "ChargeTask",
            "read as written, so nothing else fails"
        );
        assert_eq!(attrs.name.unwrap().value(), "charge", "parsing went on");

        let cx = Ctxt::new();
        TaskAttrs::parse(&cx, quote!(type_name = 3));
        assert_eq!(
            errors(cx),
            [
                "expected the generated type's identifier after `type_name =` in `#[aiki::task]`, e.g. `type_name = ChargeTask`"
            ]
        );
    }

    #[test]
    fn suggests_only_close_keys() {
        assert_eq!(edit_distance("verison", "version"), 1);
        assert_eq!(closest("nmae", &["name", "retry"]), Some("name"));
        assert_eq!(closest("colour", WORKFLOW_KEYS), None);
    }
}
