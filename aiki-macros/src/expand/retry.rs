//! `fn retry(&self)` from a validated retry attribute.

use proc_macro2::{Literal, TokenStream};
use quote::quote;

use crate::attr::{Number, Retry, Strategy};

/// The `retry` method, or nothing for the default (`never`).
pub(super) fn retry_fn(retry: Option<&Retry>) -> TokenStream {
    let Some(retry) = retry.filter(|retry| retry.strategy != Strategy::Never) else {
        return TokenStream::new();
    };
    let attempts = retry
        .max_attempts
        .as_ref()
        .map(|n| Literal::u32_unsuffixed(n.value as u32));
    let delay = retry.delay_ms.as_ref().map(millis);
    let constructor = match retry.strategy {
        Strategy::Fixed => quote!(fixed),
        Strategy::Exponential => quote!(exponential),
        Strategy::Jittered | Strategy::Never => quote!(jittered),
    };
    let mut policy = quote!(::aiki::__private::RetryPolicy::#constructor(#attempts, #delay));
    if let Some(factor) = &retry.factor {
        let factor = Literal::f64_suffixed(factor.value);
        policy = quote!(#policy?.factor(#factor));
    }
    if let Some(max_delay) = &retry.max_delay_ms {
        let max_delay = millis(max_delay);
        policy = quote!(#policy?.max_delay(#max_delay));
    }
    if let Some(jitter) = &retry.jitter {
        let jitter = Literal::f64_suffixed(jitter.value);
        policy = quote!(#policy?.jitter(#jitter));
    }
    quote! {
        fn retry(&self) -> ::aiki::__private::RetryPolicy {
            ::aiki::__private::valid_retry(|| #policy)
        }
    }
}

fn millis(number: &Number) -> TokenStream {
    let millis = Literal::u64_unsuffixed(number.value as u64);
    quote!(::aiki::__private::ms(#millis))
}
