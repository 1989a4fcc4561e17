//! `aiki endpoints`: the push endpoints an aiki server's dispatcher delivers runs to.

use std::time::Duration;

use aiki::store::Namespace;
use clap::Subcommand;

use super::parse::{endpoint_budget, endpoint_url, namespace, parse_duration};

/// `endpoints` subcommands.
#[derive(Debug, Subcommand)]
pub enum EndpointsCommand {
    /// Sets where the runs of a workflow version are pushed. A new endpoint gets a secret,
    /// printed once (give it to the endpoint: `aiki::endpoint::Endpoint::builder(..).secret(..)`);
    /// setting an existing one changes its URL and budget and keeps its secrets.
    Set {
        /// The workflow version, `NAME@VERSION`.
        #[arg(value_parser = namespace)]
        workflow: Namespace,
        /// Where runs are posted (`https://…` or `http://…`).
        #[arg(value_parser = endpoint_url)]
        endpoint: String,
        /// The endpoint's execution budget: the platform's request timeout, 1s to 1h (default
        /// 60s for a new endpoint). The dispatcher waits this long and 10 s for an answer.
        #[arg(long, value_parser = endpoint_budget)]
        budget: Option<Duration>,
    },
    /// Lists the endpoints: version, URL, budget, and their secrets' ids and expiry (never a
    /// secret).
    List,
    /// Makes a new secret (printed once) that signs deliveries from now on, beside the current
    /// one until the overlap ends; then only the new one signs. At most two are active.
    Rotate {
        /// The workflow version, `NAME@VERSION`.
        #[arg(value_parser = namespace)]
        workflow: Namespace,
        /// How long the current secret keeps signing beside the new one (default 24h; `0s`
        /// retires it at once).
        #[arg(long, default_value = "24h", value_parser = parse_duration)]
        overlap: Duration,
    },
    /// Removes a version's endpoint: its runs are no longer pushed (workers may claim them).
    Remove {
        /// The workflow version, `NAME@VERSION`.
        #[arg(value_parser = namespace)]
        workflow: Namespace,
    },
}
