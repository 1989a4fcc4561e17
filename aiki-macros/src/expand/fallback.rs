//! What is emitted for invalid input: the user's function untouched, a stub of the generated
//! type, and the errors. The user sees the real mistakes, not a cascade of unresolved names.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::ItemFn;

use crate::ast::camel_case;

/// The function, a unit struct named like the generated type, and `compile_error!`s.
pub(crate) fn fallback(item: Option<&ItemFn>, error: syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let Some(item) = item else { return errors };
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
