//! Tasks, events and a workflow-defining macro shared by the scenario tests.

#![allow(dead_code, unreachable_pub)]

use aiki::{Event, Task, TaskContext, TaskError};
use aiki_tests::Executions;

/// Defines a task named `$name` that logs its execution and returns `"$name(<input>)"`.
#[macro_export]
macro_rules! echo_task {
    ($ty:ident, $name:literal) => {
        #[derive(Debug)]
        pub struct $ty;

        impl aiki::Task for $ty {
            type Input = String;
            type Output = String;
            const NAME: &'static str = $name;

            async fn execute(
                &self,
                input: String,
                ctx: aiki::TaskContext,
            ) -> Result<String, aiki::TaskError> {
                ctx.state::<aiki_tests::Executions>()?.record($name);
                Ok(format!("{}({input})", $name))
            }
        }
    };
}

/// Defines a workflow version whose body is the given block.
#[macro_export]
macro_rules! workflow {
    ($ty:ident, $name:literal, $version:literal, |$run:ident, $input:ident: $in:ty| -> $out:ty $body:block) => {
        #[derive(Debug)]
        struct $ty;

        impl aiki::Workflow for $ty {
            type Input = $in;
            type Output = $out;
            const NAME: &'static str = $name;
            const VERSION: &'static str = $version;

            fn events() -> Vec<aiki::EventSpec> {
                $crate::common::events()
            }

            #[allow(unused_variables)]
            async fn run(&self, $run: &aiki::Run, $input: $in) -> Result<$out, aiki::WorkflowError> $body
        }
    };
}

echo_task!(TaskA, "task-a");
echo_task!(TaskB, "task-b");
echo_task!(TaskC, "task-c");

/// An event without payload: "go on".
pub struct Proceed;

impl Event for Proceed {
    const NAME: &'static str = "proceed";
    type Payload = ();
}

/// An approval, with the approver's name.
pub struct Approved;

impl Event for Approved {
    const NAME: &'static str = "approved";
    type Payload = String;
}

/// A payment, in cents.
pub struct PaymentReceived;

impl Event for PaymentReceived {
    const NAME: &'static str = "payment_received";
    type Payload = u64;
}

/// The events every test workflow declares.
pub fn events() -> Vec<aiki::EventSpec> {
    vec![Proceed::spec(), Approved::spec(), PaymentReceived::spec()]
}

/// A task that returns how many times it has run so far (1, 2, …) for the same input.
pub struct NextNumber;

impl Task for NextNumber {
    type Input = String;
    type Output = usize;
    const NAME: &'static str = "next-number";

    async fn execute(&self, _input: String, ctx: TaskContext) -> Result<usize, TaskError> {
        let executions = ctx.state::<Executions>()?;
        executions.record("next-number");
        Ok(executions.count("next-number"))
    }
}
