//! Real worker processes for the crash tests and the chaos soak: start them from a
//! [`Command`], signal them (`kill -9`, `SIGSTOP`/`SIGCONT`), and read the store while its
//! database may be restarting. Whatever is still running when the set is dropped is
//! continued (if stopped), killed and reaped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aiki::store::StoreError;
use aiki::{ClientError, RunHandle, RunId, RunRecord, RunStatus, Workflow};

/// How long the helpers here ride out a store outage before they fail.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// The worker processes of one test, by slot.
#[derive(Debug, Default)]
pub struct WorkerProcesses {
    children: Vec<Child>,
}

impl WorkerProcesses {
    /// Starts a worker process in a new slot (its stdout discarded); returns the slot.
    pub fn spawn(&mut self, command: Command) -> usize {
        self.children.push(start(command));
        self.children.len() - 1
    }

    /// Starts a worker process in slot `slot`, whose previous process must have ended.
    pub fn respawn(&mut self, slot: usize, command: Command) {
        self.children[slot] = start(command);
    }

    /// How many slots there are.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// `true` when no process was started.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Sends `signal` (`STOP`, `CONT`, …) to the process in `slot`.
    pub fn signal(&self, slot: usize, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.children[slot].id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// `kill -9`s the process in `slot` and reaps it.
    pub fn kill_9(&mut self, slot: usize) {
        self.children[slot].kill().expect("SIGKILL");
        self.children[slot].wait().expect("reaped");
    }

    /// `true` while the process in `slot` has not exited.
    pub fn is_running(&mut self, slot: usize) -> bool {
        self.children[slot]
            .try_wait()
            .expect("the process's status")
            .is_none()
    }
}

fn start(mut command: Command) -> Child {
    command
        .stdout(Stdio::null())
        .spawn()
        .expect("the worker process starts")
}

impl Drop for WorkerProcesses {
    fn drop(&mut self) {
        for child in &mut self.children {
            if child.try_wait().ok().flatten().is_none() {
                let _ = Command::new("kill")
                    .arg("-CONT")
                    .arg(child.id().to_string())
                    .status();
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Waits for a run to reach `status`, riding out store outages (a restarting database).
pub async fn wait_for<W: Workflow>(run: &RunHandle<W>, status: RunStatus) -> RunRecord {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match run.wait_for_status_timeout(status, PATIENCE).await {
            Ok(record) => return record,
            Err(ClientError::Store(error)) if error.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("run {} did not reach `{status}`: {error}", run.id()),
        }
    }
}

/// A run's history, riding out a store outage.
pub async fn history<S: aiki::store::ReadStore + ?Sized>(
    store: &std::sync::Arc<S>,
    id: RunId,
) -> aiki::store::History {
    ride_out(|| store.load_history(id), || format!("history of run {id}")).await
}

/// Calls the store until it answers, for at most [`PATIENCE`] of transient errors.
async fn ride_out<T, F: Future<Output = Result<T, StoreError>>>(
    mut call: impl FnMut() -> F,
    what: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match call().await {
            Ok(value) => return value,
            Err(error) if error.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("{}: {error}", what()),
        }
    }
}
