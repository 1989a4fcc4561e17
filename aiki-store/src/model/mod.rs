//! The records a run's history is made of.

mod action;
mod catalog;
mod config;
mod counts;
mod entry;
mod event;
mod fork;
mod ids;
mod lease;
mod listing;
mod outbox;
mod queue;
mod run;
mod sleep;
mod timeline;
mod transition;
mod wait;
mod worker;

pub use action::*;
pub use catalog::*;
pub use config::*;
pub use counts::*;
pub use entry::*;
pub use event::*;
pub use fork::*;
pub use ids::*;
pub use lease::*;
pub use listing::*;
pub use outbox::*;
pub use queue::*;
pub use run::*;
pub use sleep::*;
pub use timeline::*;
pub use transition::*;
pub use wait::*;
pub use worker::*;
