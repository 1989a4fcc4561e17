//! What is emitted for invalid input, so that the user sees the macro's errors and nothing
//! else: no cascade of unresolved names or missing impls where the generated type is used
//! (thiserror's `invalid-input-impl-anyway`).
//!
//! When the function's types are known and nameable, the fallback is the full expansion with
//! [`Body::Errors`](super::Body::Errors): the generated type, its inherent methods and trait
//! impls, the event types, with the errors as the body of the one method that would call the
//! function. Otherwise (the function did not parse, its output type is missing, it is generic)
//! it is [`fallback`]: the function, a unit struct named like the generated type, and the
//! errors; a workflow's function keeps `run.events()` in scope over event types local to its
//! body (`workflow::fallback_fn`), so that its event waits add no error of their own.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Ident, ItemFn};

/// The function, a unit struct `ident` (when given: not when its name collides), and the
/// `compile_error!`s.
pub(crate) fn fallback(
    item: Option<&ItemFn>,
    ident: Option<&Ident>,
    error: syn::Error,
) -> TokenStream {
    let errors = error.to_compile_error();
    let Some(item) = item else { return errors };
    let item = user_fn(item);
    let stub = ident.map(|ident| {
        let vis = &item.vis;
        quote! {
            #[doc(hidden)]
            #[allow(dead_code)]
            #[derive(::core::fmt::Debug)]
            #vis struct #ident;
        }
    });
    quote! {
        #item
        #stub
        #errors
    }
}

/// The user's function as the fallback emits it: with its body; without a `self` receiver
/// (already reported) so that rustc does not report it again; with `dead_code` allowed, since
/// no generated impl calls it.
pub(crate) fn user_fn(item: &ItemFn) -> ItemFn {
    let mut item = item.clone();
    item.sig.inputs = std::mem::take(&mut item.sig.inputs)
        .into_pairs()
        .filter(|pair| !matches!(pair.value(), syn::FnArg::Receiver(_)))
        .collect();
    item.attrs.push(syn::parse_quote!(#[allow(dead_code)]));
    item
}
