//! Code generation, from the validated model only.
//!
//! The generated code implements the runtime traits and calls into `::aiki::__private`; all
//! logic lives in `aiki`. Paths are absolute, generated locals start with `__aiki_`, and impls
//! sit in `const _: () = { ... };`.

mod fallback;
mod retry;
mod task;
mod workflow;

pub(crate) use fallback::fallback;
pub(crate) use task::task;
pub(crate) use workflow::{fallback_fn as workflow_fallback_fn, workflow};

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::{Ident, LitStr, Type};

use crate::ast::last_span;

/// What the generated runtime method (`Task::execute`, `Workflow::run`) does.
pub(crate) enum Body {
    /// Calls the user's function: the expansion of valid input.
    Call,
    /// Is the macro's `compile_error!`s: the fallback for invalid input, which emits every
    /// generated item so that their uses type-check, and the errors in the one body that would
    /// call the function (whose signature may be what is wrong).
    Errors(TokenStream),
}

impl Body {
    fn is_call(&self) -> bool {
        matches!(self, Body::Call)
    }
}

/// An attribute's string value; absent, which only the fallback sees, the function's name.
fn or_fn_name(value: Option<&LitStr>, fn_ident: &Ident, body: &Body, key: &str) -> LitStr {
    match value {
        Some(value) => value.clone(),
        None if body.is_call() => panic!("BUG: a checked attribute without `{key}`"),
        None => LitStr::new(&fn_ident.to_string(), fn_ident.span()),
    }
}

/// The role of a type, naming the hidden check traits of `aiki::__private`.
#[derive(Clone, Copy)]
enum Role {
    TaskInput,
    TaskOutput,
    WorkflowInput,
    WorkflowOutput,
    EventPayload,
}

/// `Type: Check` where-predicates, one per requirement (`Serialize`, `DeserializeOwned`,
/// `JsonSchema`), spanned at the user's type. An impl carrying them reports a missing trait
/// once, at that type, with the message of the check trait; inside the impl the bounds of the
/// runtime traits then hold.
fn type_checks(ty: &Type, role: Role) -> TokenStream {
    let prefix = match role {
        Role::TaskInput => "TaskInput",
        Role::TaskOutput => "TaskOutput",
        Role::WorkflowInput => "WorkflowInput",
        Role::WorkflowOutput => "WorkflowOutput",
        Role::EventPayload => "EventPayload",
    };
    let span = last_span(ty);
    let checks = ["Serialize", "Deserialize", "Schema"].map(|requirement| {
        let check = format_ident!("{prefix}{requirement}", span = span);
        quote_spanned!(span=> #ty: ::aiki::__private::#check,)
    });
    quote!(#(#checks)*)
}

/// `Error: Check`, for an error type written out in `Result<T, E>`.
fn error_check(ty: Option<&Type>, check: &str) -> TokenStream {
    let Some(ty) = ty else {
        return TokenStream::new();
    };
    let span = last_span(ty);
    let check = format_ident!("{check}", span = span);
    quote_spanned!(span=> #ty: ::aiki::__private::#check,)
}

/// The derives of generated unit types, with absolute paths.
fn unit_derives() -> TokenStream {
    quote! {
        #[derive(
            ::core::clone::Clone,
            ::core::marker::Copy,
            ::core::fmt::Debug,
            ::core::default::Default
        )]
    }
}

/// The fn's `///` docs, to repeat on the generated type.
fn doc_attrs(item: &syn::ItemFn) -> Vec<&syn::Attribute> {
    item.attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .collect()
}
