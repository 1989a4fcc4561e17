//! Guides: longer walks through Aiki than the API docs, with examples that compile (and, where
//! they need no database or server, run on the `memory:` store or
//! [`TestEnv`][test-env]).
//!
//! # Guides
//!
//! * [`concepts`]: runs, tasks, content addresses, the one rule of replay, sleeps, events,
//!   children and versions. Start here.
//! * [`changing_running_workflows`]: which code changes are safe for runs in flight, how a
//!   recorded output may change, when to start a new version, the impact check, and retry and
//!   fork after a fix.
//! * [`idempotency`]: side effects that must happen once: task idempotency keys, at-least-once
//!   and at-most-once tasks, reference ids on starts, `send_once` for events.
//! * [`operating_runs`]: what each run status means, the `aiki` command, the server and its
//!   API keys, stalled runs, pausing, retention.
//! * [`schedules`]: runs started on a cron expression or an interval; overlap and catch-up
//!   policies; time zones.
//! * [`scaling_out`]: many workers on PostgreSQL: claims, the daemons' leader, LISTEN/NOTIFY.
//! * [`delivery`][delivery] (features `endpoint` and `redis`): workers over HTTP, Redis, and a
//!   push endpoint on a serverless platform.
//! * [`testing_workflows`][testing] (feature `testing`): `TestEnv`, a manual clock that skips
//!   to the next timer, task mocks.
//!
#![cfg_attr(
    all(feature = "endpoint", feature = "redis"),
    doc = "[delivery]: delivery"
)]
#![cfg_attr(
    not(all(feature = "endpoint", feature = "redis")),
    doc = "[delivery]: self"
)]
#![cfg_attr(feature = "testing", doc = "[testing]: testing_workflows")]
#![cfg_attr(not(feature = "testing"), doc = "[testing]: self")]
#![cfg_attr(feature = "testing", doc = "[test-env]: crate::testing::TestEnv")]
#![cfg_attr(not(feature = "testing"), doc = "[test-env]: self")]

/// Declares a guide module whose docs are `docs/guide/$file`, with the links that guides make
/// to items behind features resolved either way: to the item when the feature is on, to this
/// module's list of guides when it is off.
macro_rules! guide {
    ($(#[$attr:meta])* $file:literal => $name:ident) => {
        $(#[$attr])*
        #[doc = include_str!(concat!("../docs/guide/", $file))]
        #[doc = ""]
        #[cfg_attr(
            all(feature = "endpoint", feature = "redis"),
            doc = "[delivery guide]: crate::guide::delivery"
        )]
        #[cfg_attr(
            not(all(feature = "endpoint", feature = "redis")),
            doc = "[delivery guide]: crate::guide"
        )]
        #[cfg_attr(
            feature = "testing",
            doc = "[testing guide]: crate::guide::testing_workflows"
        )]
        #[cfg_attr(not(feature = "testing"), doc = "[testing guide]: crate::guide")]
        #[cfg_attr(
            feature = "testing",
            doc = "[`TestEnv`]: crate::testing::TestEnv"
        )]
        #[cfg_attr(not(feature = "testing"), doc = "[`TestEnv`]: crate::guide")]
        #[cfg_attr(
            feature = "testing",
            doc = "[`TestEnv::deploy`]: crate::testing::TestEnv::deploy"
        )]
        #[cfg_attr(not(feature = "testing"), doc = "[`TestEnv::deploy`]: crate::guide")]
        #[cfg_attr(
            feature = "testing",
            doc = "[`TestEnv::skip_to_next_occurrence`]: crate::testing::TestEnv::skip_to_next_occurrence"
        )]
        #[cfg_attr(
            not(feature = "testing"),
            doc = "[`TestEnv::skip_to_next_occurrence`]: crate::guide"
        )]
        pub mod $name {}
    };
}

guide!("concepts.md" => concepts);
guide!("changing-running-workflows.md" => changing_running_workflows);
guide!("idempotency.md" => idempotency);
guide!("operating-runs.md" => operating_runs);
guide!("schedules.md" => schedules);
guide!("scaling-out.md" => scaling_out);
guide!(
    #[cfg(all(feature = "endpoint", feature = "redis"))]
    "delivery.md" => delivery
);
guide!(
    #[cfg(feature = "testing")]
    "testing-workflows.md" => testing_workflows
);
