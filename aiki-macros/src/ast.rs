//! The typed model of an annotated function, keeping the syn nodes for spans.

use proc_macro2::Span;
use quote::format_ident;
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, ItemFn, PathArguments, ReturnType, Type};

use crate::ctxt::Ctxt;

/// Which macro is being expanded, for messages.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Task,
    Workflow,
}

impl Kind {
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Kind::Task => "task",
            Kind::Workflow => "workflow",
        }
    }
}

/// A `#[task]` function.
pub(crate) struct TaskFn {
    pub(crate) item: ItemFn,
    /// The generated type, `ChargeCard` for `charge_card`.
    pub(crate) ident: Ident,
    pub(crate) input: Option<Type>,
    /// The arguments, in order.
    pub(crate) args: Vec<TaskArg>,
    /// The types of the `State<T>` arguments, in order.
    pub(crate) states: Vec<Type>,
    pub(crate) output: Type,
    pub(crate) error: Option<Type>,
    /// Whether the signature's types can be named outside the function (see [`concrete`]).
    pub(crate) concrete: bool,
}

/// What a task function argument is filled with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TaskArg {
    /// The task's input.
    Input,
    /// `State<T>`, from the worker's shared state.
    State,
    /// `TaskContext` (by value) or `&TaskContext`.
    Context { by_ref: bool },
}

/// A `#[workflow]` function.
pub(crate) struct WorkflowFn {
    pub(crate) item: ItemFn,
    /// The generated type, `OrderV1` for `order_v1`.
    pub(crate) ident: Ident,
    pub(crate) input: Option<Type>,
    pub(crate) output: Type,
    pub(crate) error: Option<Type>,
    /// Whether the signature's types can be named outside the function (see [`concrete`]).
    pub(crate) concrete: bool,
}

impl TaskFn {
    /// Reads a task function whose generated type is `ident`, recording every problem of its
    /// signature in `cx`. The model is built despite such problems (for the fallback), unless
    /// the type's name or the output type is missing.
    pub(crate) fn from_item(cx: &Ctxt, item: ItemFn, ident: Option<Ident>) -> Option<TaskFn> {
        check_signature(cx, &item, Kind::Task);
        let mut input = None;
        let mut args = Vec::new();
        let mut states = Vec::new();
        let mut context_seen = false;
        for arg in &item.sig.inputs {
            let FnArg::Typed(arg) = arg else { continue };
            let ty = &*arg.ty;
            let (by_ref, target) = match ty {
                Type::Reference(reference) => (true, &*reference.elem),
                other => (false, other),
            };
            if last_segment_is(target, "TaskContext") {
                if std::mem::replace(&mut context_seen, true) {
                    cx.error_spanned_by(ty, "a task takes at most one `TaskContext` argument");
                }
                args.push(TaskArg::Context { by_ref });
            } else if !by_ref && last_segment_is(target, "State") {
                args.push(TaskArg::State);
                states.push(target.clone());
            } else if input.is_none() {
                input = Some(ty.clone());
                args.push(TaskArg::Input);
            } else {
                cx.error_spanned_by(
                    arg,
                    "a task takes at most one input argument; the others must be `State<T>` or `TaskContext`",
                );
            }
        }
        let (output, error) = result_types(cx, &item, Kind::Task)?;
        Some(TaskFn {
            concrete: concrete(&item, &output, error.as_ref()),
            item,
            ident: ident?,
            input,
            args,
            states,
            output,
            error,
        })
    }
}

impl WorkflowFn {
    /// Reads a workflow function whose generated type is `ident`, recording every problem of
    /// its signature in `cx`. The model is built despite such problems (for the fallback),
    /// unless the type's name or the output type is missing.
    pub(crate) fn from_item(cx: &Ctxt, item: ItemFn, ident: Option<Ident>) -> Option<WorkflowFn> {
        check_signature(cx, &item, Kind::Workflow);
        let mut typed = item.sig.inputs.iter().filter_map(|arg| match arg {
            FnArg::Typed(arg) => Some(arg),
            FnArg::Receiver(_) => None,
        });
        // Without the run first, the first argument is likely the input (the run forgotten):
        // the fallback's type takes it as such, so that the calls starting the workflow check.
        let mut misplaced_input = None;
        match typed.next() {
            Some(run) if is_run_ref(&run.ty) => {}
            Some(other) => {
                misplaced_input = Some((*other.ty).clone());
                cx.error_spanned_by(
                    &other.ty,
                    "the first argument of a workflow must be the run context, `run: &aiki::Run`",
                );
            }
            None if item.sig.receiver().is_none() => {
                cx.syn_error(syn::Error::new(
                    item.sig.paren_token.span.join(),
                    "a workflow takes the run context first: `run: &aiki::Run`, then at most one input argument",
                ));
            }
            None => {}
        }
        let input = typed.next().map(|arg| (*arg.ty).clone());
        for extra in typed {
            cx.error_spanned_by(
                extra,
                "a workflow takes `run: &aiki::Run` and at most one input argument; pass several values as one struct",
            );
        }
        let input = misplaced_input.or(input);
        let (output, error) = result_types(cx, &item, Kind::Workflow)?;
        Some(WorkflowFn {
            concrete: concrete(&item, &output, error.as_ref()),
            item,
            ident: ident?,
            input,
            output,
            error,
        })
    }
}

/// Checks what tasks and workflows share: an `async fn`, free, not generic.
fn check_signature(cx: &Ctxt, item: &ItemFn, kind: Kind) {
    let sig = &item.sig;
    let noun = kind.noun();
    let fail = |tokens: &dyn quote::ToTokens, message: String| {
        cx.error_spanned_by(tokens, message);
    };
    if sig.asyncness.is_none() {
        fail(
            &sig.fn_token,
            format!("`#[aiki::{noun}]` must be on an `async fn`; add `async`"),
        );
    }
    if let Some(constness) = &sig.constness {
        fail(constness, format!("a {noun} cannot be a `const fn`"));
    }
    if let Some(unsafety) = &sig.unsafety {
        fail(unsafety, format!("a {noun} cannot be an `unsafe fn`"));
    }
    if let Some(abi) = &sig.abi {
        fail(abi, format!("a {noun} cannot have an `extern` ABI"));
    }
    if let Some(variadic) = &sig.variadic {
        fail(variadic, format!("a {noun} cannot be variadic"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        fail(
            &sig.generics,
            format!(
                "generic {noun}s are not supported: the input and output types of a {noun} must be concrete, so that its schemas are fixed"
            ),
        );
    }
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(receiver) => fail(
                receiver,
                format!(
                    "a {noun} cannot take `self`: write a free `async fn`; `#[aiki::{noun}]` generates the type"
                ),
            ),
            FnArg::Typed(typed) if contains_impl_trait(&typed.ty) => fail(
                &typed.ty,
                format!(
                    "generic {noun}s are not supported: `impl Trait` arguments are generic; name a concrete type"
                ),
            ),
            FnArg::Typed(_) => {}
        }
    }
}

/// Whether the signature's types can be named outside the function, as the generated impls
/// name them: no generic parameters, no `impl Trait`. Only a fallback with errors already
/// reported asks; the valid expansion has both refused by [`check_signature`].
fn concrete(item: &ItemFn, output: &Type, error: Option<&Type>) -> bool {
    let sig = &item.sig;
    sig.generics.params.is_empty()
        && sig.generics.where_clause.is_none()
        && !sig.inputs.iter().any(|arg| match arg {
            FnArg::Typed(typed) => mentions_impl(&typed.ty),
            FnArg::Receiver(_) => false,
        })
        && !mentions_impl(output)
        && !error.is_some_and(mentions_impl)
}

/// Whether `impl` appears anywhere in a type (`Vec<impl Trait>`, `fn() -> impl Trait`).
fn mentions_impl(ty: &Type) -> bool {
    fn walk(tokens: proc_macro2::TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            proc_macro2::TokenTree::Ident(ident) => ident == "impl",
            proc_macro2::TokenTree::Group(group) => walk(group.stream()),
            _ => false,
        })
    }
    walk(quote::ToTokens::to_token_stream(ty))
}

fn contains_impl_trait(ty: &Type) -> bool {
    match ty {
        Type::ImplTrait(_) => true,
        Type::Reference(reference) => contains_impl_trait(&reference.elem),
        Type::Paren(paren) => contains_impl_trait(&paren.elem),
        _ => false,
    }
}

/// `Result<Output, Error>` (or an alias named `Result<Output>`): the output and error types.
fn result_types(cx: &Ctxt, item: &ItemFn, kind: Kind) -> Option<(Type, Option<Type>)> {
    let expected = match kind {
        Kind::Task => "`Result<Output, E>` where `E` converts into `aiki::TaskError`",
        Kind::Workflow => "`Result<Output, aiki::WorkflowError>`",
    };
    let noun = kind.noun();
    let ty = match &item.sig.output {
        ReturnType::Default => {
            cx.syn_error(syn::Error::new(
                item.sig.paren_token.span.close(),
                format!("a {noun} must return {expected}; add a return type"),
            ));
            return None;
        }
        ReturnType::Type(_, ty) => ty,
    };
    let arguments = match &**ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .filter(|segment| segment.ident == "Result")
            .and_then(|segment| match &segment.arguments {
                PathArguments::AngleBracketed(arguments) => Some(arguments),
                _ => None,
            }),
        _ => None,
    };
    let mut types = arguments
        .into_iter()
        .flat_map(|arguments| &arguments.args)
        .filter_map(|argument| match argument {
            GenericArgument::Type(ty) => Some(ty.clone()),
            _ => None,
        });
    let Some(output) = types.next() else {
        cx.error_spanned_by(
            ty,
            format!(
                "a {noun} must return {expected}, so that failures can be recorded and retried"
            ),
        );
        return None;
    };
    Some((output, types.next()))
}

fn last_segment_is(ty: &Type, name: &str) -> bool {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == name),
        _ => false,
    }
}

fn is_run_ref(ty: &Type) -> bool {
    matches!(ty, Type::Reference(reference) if reference.mutability.is_none() && last_segment_is(&reference.elem, "Run"))
}

/// The generated type's name: `type_name = ...` as written, else the function's name in
/// CamelCase (`charge_card` → `ChargeCard`), spanned at the function's name.
pub(crate) fn type_ident(cx: &Ctxt, item: &ItemFn, type_name: Option<&Ident>) -> Option<Ident> {
    if let Some(type_name) = type_name {
        return Some(type_name.clone());
    }
    let ident = &item.sig.ident;
    let camel = camel_case(&ident.to_string());
    if camel.is_empty() {
        cx.error_spanned_by(
            ident,
            "cannot derive a type name from this function name; name the type with `type_name = ...`",
        );
        return None;
    }
    Some(format_ident!("{}", camel, span = ident.span()))
}

/// The type of an event: the workflow's type, then the event in CamelCase
/// (`OrderV1` + `payment_received` → `OrderV1PaymentReceived`), spanned at the event.
pub(crate) fn event_type(workflow: &Ident, event: &Ident) -> Ident {
    format_ident!(
        "{}{}",
        workflow,
        camel_case(&event.to_string()),
        span = event.span()
    )
}

/// `payment_received` → `PaymentReceived`; a leading `r#` is dropped, and an underscore
/// between two digits is kept (`greet_v1_1` → `GreetV1_1`, not `GreetV11`).
pub(crate) fn camel_case(snake: &str) -> String {
    let snake = snake.strip_prefix("r#").unwrap_or(snake);
    let mut camel = String::new();
    for word in snake.split('_').filter(|word| !word.is_empty()) {
        let digits_meet = camel.ends_with(|c: char| c.is_ascii_digit())
            && word.starts_with(|c: char| c.is_ascii_digit());
        if digits_meet {
            camel.push('_');
        }
        let mut chars = word.chars();
        camel.extend(chars.next().map(|c| c.to_ascii_uppercase()));
        camel.push_str(chars.as_str());
    }
    camel
}

/// The span of a type from its first to its last token, as far as stable Rust allows: the
/// span of its last token (a closing `>` or a group).
pub(crate) fn last_span(ty: &Type) -> Span {
    quote::ToTokens::to_token_stream(ty)
        .into_iter()
        .last()
        .map_or_else(|| ty.span(), |token| token.span())
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn errors(cx: Ctxt) -> Vec<String> {
        match cx.check() {
            Ok(()) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    fn task(cx: &Ctxt, item: ItemFn) -> Option<TaskFn> {
        let ident = type_ident(cx, &item, None);
        TaskFn::from_item(cx, item, ident)
    }

    fn workflow(cx: &Ctxt, item: ItemFn) -> Option<WorkflowFn> {
        let ident = type_ident(cx, &item, None);
        WorkflowFn::from_item(cx, item, ident)
    }

    #[test]
    fn reads_a_task_with_state_and_context() {
        let cx = Ctxt::new();
        let task = task(
            &cx,
            parse_quote! {
                async fn charge_card(State(db): State<Db>, input: Charge, ctx: TaskContext) -> Result<Receipt, TaskError> {}
            },
        )
        .unwrap();
        assert!(errors(cx).is_empty());
        assert_eq!(task.ident, "ChargeCard");
        assert_eq!(task.input, Some(parse_quote!(Charge)));
        assert_eq!(
            task.args,
            [
                TaskArg::State,
                TaskArg::Input,
                TaskArg::Context { by_ref: false }
            ]
        );
        assert_eq!(task.output, parse_quote!(Receipt));
        assert_eq!(task.error, Some(parse_quote!(TaskError)));
    }

    #[test]
    fn reports_every_signature_problem() {
        let cx = Ctxt::new();
        let task = task(&cx, parse_quote! { fn f<T>(a: A, b: B) -> Option<T> {} });
        assert!(task.is_none());
        let errors = errors(cx);
        assert_eq!(errors.len(), 4, "{errors:#?}");
        assert!(errors[0].contains("must be on an `async fn`"));
        assert!(errors[1].starts_with("generic tasks are not supported"));
        assert!(errors[2].contains("at most one input argument"));
        assert!(errors[3].contains("must return `Result<Output, E>`"));
    }

    #[test]
    fn reads_a_workflow_without_input() {
        let cx = Ctxt::new();
        let workflow = workflow(
            &cx,
            parse_quote! { async fn order_v1(run: &aiki::Run) -> Result<(), WorkflowError> {} },
        )
        .unwrap();
        assert!(errors(cx).is_empty());
        assert_eq!(workflow.ident, "OrderV1");
        assert!(workflow.input.is_none());
    }

    #[test]
    fn a_workflow_needs_the_run_first() {
        let cx = Ctxt::new();
        let workflow = workflow(
            &cx,
            parse_quote! { async fn order(input: Order) -> Result<(), WorkflowError> {} },
        )
        .expect("a model for the fallback");
        assert_eq!(
            errors(cx),
            ["the first argument of a workflow must be the run context, `run: &aiki::Run`"]
        );
        assert_eq!(
            workflow.input,
            Some(parse_quote!(Order)),
            "the fallback takes the misplaced argument as the input"
        );
    }

    #[test]
    fn a_task_with_signature_errors_still_has_a_model_for_the_fallback() {
        let cx = Ctxt::new();
        let charge = task(
            &cx,
            parse_quote! { fn charge(input: Charge) -> Result<Receipt, TaskError> {} },
        )
        .expect("a model for the fallback");
        assert_eq!(errors(cx).len(), 1);
        assert!(charge.concrete);
        assert_eq!(charge.input, Some(parse_quote!(Charge)));

        let cx = Ctxt::new();
        let generic = task(
            &cx,
            parse_quote! { async fn charge<T>(input: T) -> Result<Vec<impl Sized>, TaskError> {} },
        )
        .expect("a model for the fallback");
        assert_eq!(errors(cx).len(), 1);
        assert!(!generic.concrete, "its types cannot be named in an impl");
    }

    #[test]
    fn the_type_name_replaces_the_derived_one() {
        let cx = Ctxt::new();
        let item: ItemFn = parse_quote! { async fn charge() {} };
        let named: Ident = parse_quote!(ChargeTask);
        assert_eq!(type_ident(&cx, &item, Some(&named)).unwrap(), "ChargeTask");
        assert_eq!(type_ident(&cx, &item, None).unwrap(), "Charge");
        assert!(errors(cx).is_empty());
    }

    #[test]
    fn camel_cases_function_names() {
        assert_eq!(camel_case("order_v1"), "OrderV1");
        assert_eq!(camel_case("r#type"), "Type");
        assert_eq!(camel_case("_send__email_"), "SendEmail");
        assert_eq!(camel_case("greet_v1_1"), "GreetV1_1");
    }
}
