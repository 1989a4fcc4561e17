//! Operator views: what a run is doing, in words and as data, how the workers stand, and what
//! each workflow version runs.
//!
//! The CLI renders these views (`aiki runs show`, `aiki workers`, `aiki workflows`), and so
//! will the HTTP API and the dashboard: each view is [`Serialize`](serde::Serialize), its JSON
//! shape the records' own fields plus the words and facts the view adds, so every surface
//! says the same thing.
//!
//! ```no_run
//! # async fn show(client: &aiki::Client, id: aiki::RunId) -> Result<(), aiki::ClientError> {
//! let view = aiki::ops::RunView::read(client, id).await?;
//! println!("{}: {}", view.run.status, view.doing);
//! let document = view.to_json(false); // without inputs, outputs and event data
//! # let _ = document;
//! # Ok(())
//! # }
//! ```

mod doing;
mod run;
mod version;
mod words;
mod worker;

pub use crate::liveness::{ClaimView, Liveness};
pub use doing::{retry_command, runtime_name};
pub use run::RunView;
pub use version::{BuildView, VersionView};
pub use words::{relative, span, timestamp};
pub use worker::WorkerView;
