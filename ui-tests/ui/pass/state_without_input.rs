use std::sync::atomic::{AtomicU64, Ordering};

use aiki::{Run, State, TaskContext, TaskError, WorkflowError};

/// A counter shared by the worker's tasks.
pub struct Counter(AtomicU64);

impl Counter {
    fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Takes a ticket: no input, only shared state.
#[aiki::task(name = "take-ticket")]
pub async fn take_ticket(State(counter): State<Counter>) -> Result<u64, TaskError> {
    Ok(counter.0.fetch_add(1, Ordering::SeqCst))
}

/// State and the context, by reference, in any order; the error is a `std::io::Error`.
#[aiki::task(name = "audit")]
pub async fn audit(
    ctx: &TaskContext,
    line: String,
    counter: State<Counter>,
) -> Result<(), std::io::Error> {
    let _ = (ctx.attempt(), line, counter.get());
    Ok(())
}

#[aiki::workflow(name = "tickets", version = "1")]
pub async fn tickets(run: &Run) -> Result<u64, WorkflowError> {
    use aiki::Task;
    let ticket = TakeTicket.start(run).await?;
    Audit.start(run, format!("ticket {ticket}")).await?;
    Ok(ticket)
}

fn main() {
    use aiki::{Task, Workflow};
    let _: fn() -> <TakeTicket as Task>::Input = || aiki::NoInput;
    let _: fn() -> <Tickets as Workflow>::Input = || aiki::NoInput;
    assert_eq!(Audit::NAME, "audit");
}
