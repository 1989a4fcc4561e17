//! The names of the types a macro generates against the names its function's signature uses:
//! `#[task] async fn charge(c: Charge)` would generate a second `Charge`.

use syn::{
    FnArg, GenericArgument, Ident, ItemFn, Path, PathArguments, ReturnType, Type, TypeParamBound,
};

use crate::ast::{Kind, camel_case, event_type};
use crate::attr::EventAttr;
use crate::ctxt::Ctxt;

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

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;
    use crate::attr::WorkflowAttrs;

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
}
