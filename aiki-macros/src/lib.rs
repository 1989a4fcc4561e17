//! The `#[task]` and `#[workflow]` attribute macros of Aiki. Use them through the `aiki`
//! crate, which documents them: `aiki::task` and `aiki::workflow`.
//!
//! Pipeline: `attr` parses the arguments, `ast` reads the function, `check` validates
//! across both, `expand` generates code from the validated model only. Errors accumulate in
//! `ctxt` and are all reported, beside the user's function (`expand::fallback`).

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use syn::ItemFn;

use crate::ast::{TaskFn, WorkflowFn};
use crate::attr::{TaskAttrs, WorkflowAttrs};
use crate::ctxt::Ctxt;

/// Makes an `async fn` a durable task. Documented in `aiki::task`.
#[proc_macro_attribute]
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let attrs = TaskAttrs::parse(&cx, args.into());
    let Some(item) = parse_fn(&cx, item.into(), "task") else {
        return finish("task", cx, None, TokenStream2::new);
    };
    check::task(&cx, &attrs, item.sig.ident.span());
    let model = TaskFn::from_item(&cx, item.clone());
    finish("task", cx, Some(&item), || {
        expand::task(
            &attrs,
            &model.expect("BUG: a task without errors has a model"),
        )
    })
}

/// Makes an `async fn(&Run, Input)` a durable workflow version. Documented in
/// `aiki::workflow`.
#[proc_macro_attribute]
pub fn workflow(args: TokenStream, item: TokenStream) -> TokenStream {
    let cx = Ctxt::new();
    let attrs = WorkflowAttrs::parse(&cx, args.into());
    let Some(item) = parse_fn(&cx, item.into(), "workflow") else {
        return finish("workflow", cx, None, TokenStream2::new);
    };
    check::workflow(&cx, &attrs, item.sig.ident.span());
    let model = WorkflowFn::from_item(&cx, item.clone());
    finish("workflow", cx, Some(&item), || {
        expand::workflow(
            &attrs,
            &model.expect("BUG: a workflow without errors has a model"),
        )
    })
}

/// The annotated item as a function; anything else is an error spanning it.
fn parse_fn(cx: &Ctxt, item: TokenStream2, macro_name: &str) -> Option<ItemFn> {
    match syn::parse2::<ItemFn>(item.clone()) {
        Ok(item) => Some(item),
        Err(_) => {
            cx.error_spanned_by(
                item,
                format!("`#[aiki::{macro_name}]` goes on an `async fn`"),
            );
            None
        }
    }
}

/// Expands when no error was recorded, falls back otherwise; prints the result when
/// `AIKI_MACROS_DEBUG` is set.
fn finish(
    macro_name: &str,
    cx: Ctxt,
    item: Option<&ItemFn>,
    expand: impl FnOnce() -> TokenStream2,
) -> TokenStream {
    let output = match cx.check() {
        Ok(()) => expand(),
        Err(error) => expand::fallback(item, error),
    };
    if std::env::var_os("AIKI_MACROS_DEBUG").is_some_and(|value| value != "0") {
        let subject = item.map_or_else(String::new, |item| item.sig.ident.to_string());
        eprintln!("#[aiki::{macro_name}] {subject} expands to:\n{output}\n");
    }
    output.into()
}
