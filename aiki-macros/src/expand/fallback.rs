//! What is emitted for invalid input: the user's function, a stub of the generated type, and
//! the errors. The user sees the real mistakes, not a cascade of unresolved names.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::ItemFn;

use crate::ast::camel_case;

/// The function, a unit struct named like the generated type, and `compile_error!`s.
///
/// The function keeps its body; a `self` receiver (already reported) is dropped so that rustc
/// does not report it again, and `dead_code` is allowed since the missing impl would call it.
pub(crate) fn fallback(item: Option<&ItemFn>, error: syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let Some(item) = item else { return errors };
    let mut item = item.clone();
    item.sig.inputs = std::mem::take(&mut item.sig.inputs)
        .into_pairs()
        .filter(|pair| !matches!(pair.value(), syn::FnArg::Receiver(_)))
        .collect();
    item.attrs.push(syn::parse_quote!(#[allow(dead_code)]));
    let camel = camel_case(&item.sig.ident.to_string());
    let stub = (!camel.is_empty()).then(|| {
        let vis = &item.vis;
        let ident = format_ident!("{}", camel, span = item.sig.ident.span());
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
