//! The `#[task]` and `#[workflow]` attribute macros of Aiki. Use them through the `aiki`
//! crate, which documents them: `aiki::task` and `aiki::workflow`.
//!
//! Pipeline: `attr` parses the arguments, `ast` reads the function, `check` validates
//! across both, `expand` generates code from the validated model. Errors accumulate in `ctxt`
//! and are all reported; with errors, the fallback (`expand::fallback`) still emits the user's
//! function and, as far as the model allows, the generated items, whose generated method bodies
//! are the errors, so that their uses add no errors of their own.

mod ast;
mod attr;
mod check;
mod collision;
mod ctxt;
mod expand;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use syn::{Ident, ItemFn};

use crate::ast::{Kind, TaskFn, WorkflowFn};
use crate::attr::{TaskAttrs, WorkflowAttrs};
use crate::ctxt::Ctxt;
use crate::expand::Body;

/// Makes an `async fn` a durable task. Documented in `aiki::task`.
#[proc_macro_attribute]
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let attrs = TaskAttrs::parse(&cx, args.into());
    let Some(item) = parse_fn(&cx, item.into(), Kind::Task) else {
        return finish(Kind::Task, cx, None, None, |_| None);
    };
    check::task(&cx, &attrs, item.sig.ident.span());
    let (ident, clear) = generated_ident(&cx, Kind::Task, &item, attrs.type_name.as_ref(), &[]);
    let model = TaskFn::from_item(&cx, item.clone(), ident.clone());
    let stubbable = clear && model.as_ref().is_some_and(|model| model.concrete);
    finish(
        Kind::Task,
        cx,
        Some(&item),
        ident.filter(|_| clear),
        |body| {
            model_for(&body, model.as_ref(), stubbable)
                .map(|model| expand::task(&attrs, model, &body))
        },
    )
}

/// Makes an `async fn(&Run, Input)` a durable workflow version. Documented in
/// `aiki::workflow`.
#[proc_macro_attribute]
pub fn workflow(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let attrs = WorkflowAttrs::parse(&cx, args.into());
    let Some(item) = parse_fn(&cx, item.into(), Kind::Workflow) else {
        return finish(Kind::Workflow, cx, None, None, |_| None);
    };
    check::workflow(&cx, &attrs, item.sig.ident.span());
    let (ident, clear) = generated_ident(
        &cx,
        Kind::Workflow,
        &item,
        attrs.type_name.as_ref(),
        &attrs.events,
    );
    let model = WorkflowFn::from_item(&cx, item.clone(), ident.clone());
    let stubbable = clear && model.as_ref().is_some_and(|model| model.concrete);
    // Without the model, the fallback emits the fn alone: with its events in scope still.
    let fallback_item = expand::workflow_fallback_fn(&attrs, &item);
    finish(
        Kind::Workflow,
        cx,
        Some(&fallback_item),
        ident.filter(|_| clear),
        |body| {
            model_for(&body, model.as_ref(), stubbable)
                .map(|model| expand::workflow(&attrs, model, &body))
        },
    )
}

/// The generated type's name (`type_name`, else the function's in UpperCamelCase), and whether
/// it and the event types are clear of the names the signature uses (see `collision`).
fn generated_ident(
    cx: &Ctxt,
    kind: Kind,
    item: &ItemFn,
    type_name: Option<&Ident>,
    events: &[attr::EventAttr],
) -> (Option<Ident>, bool) {
    let ident = ast::type_ident(cx, item, type_name);
    let clear = ident.as_ref().is_none_or(|ident| {
        collision::type_names(cx, kind, item, ident, type_name.is_some(), events)
    });
    (ident, clear)
}

/// The model `body` is expanded from: always for valid input; for the fallback only when it
/// can be (`stubbable`: clear names, concrete types), else the fallback is the plain one.
fn model_for<'m, M>(body: &Body, model: Option<&'m M>, stubbable: bool) -> Option<&'m M> {
    match body {
        Body::Call => Some(model.expect("BUG: an item without errors has a model")),
        Body::Errors(_) => model.filter(|_| stubbable),
    }
}

/// The annotated item as a function; anything else is an error spanning it.
fn parse_fn(cx: &Ctxt, item: TokenStream2, kind: Kind) -> Option<ItemFn> {
    match syn::parse2::<ItemFn>(item.clone()) {
        Ok(item) => Some(item),
        Err(_) => {
            cx.error_spanned_by(
                item,
                format!("`#[aiki::{}]` goes on an `async fn`", kind.noun()),
            );
            None
        }
    }
}

/// Expands: with no error recorded, `expand(Body::Call)`; otherwise the fallback,
/// `expand(Body::Errors(..))` when the model allows it (`Some`), else the function and a unit
/// struct `ident` beside the errors. Prints the result when `AIKI_MACROS_DEBUG` is set.
fn finish(
    kind: Kind,
    cx: Ctxt,
    item: Option<&ItemFn>,
    ident: Option<Ident>,
    expand: impl FnOnce(Body) -> Option<TokenStream2>,
) -> TokenStream {
    let output = match cx.check() {
        Ok(()) => expand(Body::Call).expect("BUG: a valid item expands"),
        Err(error) => expand(Body::Errors(error.to_compile_error()))
            .unwrap_or_else(|| expand::fallback(item, ident.as_ref(), error)),
    };
    if std::env::var_os("AIKI_MACROS_DEBUG").is_some_and(|value| value != "0") {
        let subject = item.map_or_else(String::new, |item| item.sig.ident.to_string());
        eprintln!("#[aiki::{}] {subject} expands to:\n{output}\n", kind.noun());
    }
    output.into()
}
