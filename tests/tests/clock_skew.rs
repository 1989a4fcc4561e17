//! Executors whose clocks are an hour behind or an hour ahead of the store's run sleeps, task
//! retries and wait timeouts exactly as an accurate one does, on PostgreSQL directly and as
//! remote workers of a server. PostgreSQL (by default) and the server time claims, sleeps and
//! retries by their own clocks, and a worker reads time as the store's from what claims return
//! (its store clock): every due time stored, and every "has this ended" it decides, is the
//! store's. The daemons run in another worker whose clock is right, as they would in a fleet
//! (or a server): without the store clock, the hour-ahead executor's due times are an hour
//! late for them (the run never finishes), and the hour-behind one stamps its writes an hour
//! early.

use std::time::{Duration, Instant};

use aiki::{
    Client, Clock, Millis, Run, RunStatus, SystemClock, TaskContext, TaskError, Worker,
    WorkflowError,
};
use aiki_tests::{Backend, PATIENCE};

const HOUR: Millis = 3_600_000;
const SLEEP: Duration = Duration::from_millis(1_500);
const RETRY_MS: u64 = 1_000;
const WAIT: Duration = Duration::from_millis(1_500);

/// The system clock moved by `by` ms.
#[derive(Debug)]
struct Skewed {
    by: Millis,
}

impl Clock for Skewed {
    fn now(&self) -> Millis {
        SystemClock.now() + self.by
    }
}

#[aiki::task(name = "skew-flaky", retry = fixed(max_attempts = 2, delay_ms = 1000))]
async fn skew_flaky(ctx: TaskContext) -> Result<u32, TaskError> {
    if ctx.attempt() == 1 {
        return Err(TaskError::new("the first attempt fails"));
    }
    Ok(ctx.attempt())
}

#[aiki::workflow(name = "skew-timers", version = "1", events(never = String))]
async fn skew_timers(run: &Run) -> Result<String, WorkflowError> {
    run.sleep("nap", SLEEP).await?;
    let attempts = SkewFlaky.start(run).await?;
    let sent = run.events().never().wait_timeout(WAIT).await?;
    Ok(format!("{attempts} {sent:?}"))
}

/// Where the skewed executor reaches the store.
#[derive(Clone, Copy, Debug)]
enum Through {
    /// PostgreSQL, directly (its claims timed by the database's clock).
    Postgres,
    /// An aiki server in front of a SQLite file (every write timed by the server's clock).
    Server,
}

/// Runs the workflow on a worker whose clock is off by `skew` ms; the real time it took and
/// the store's times of the run's changes.
async fn run_with_skew(skew: Millis, through: Through) -> (Duration, Vec<Millis>) {
    let backend = match through {
        Through::Postgres => Backend::Postgres,
        Through::Server => Backend::Sqlite,
    };
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.expect("the store opens");
    let daemons = Worker::builder(store.clone())
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    let (executor_store, server) = match through {
        Through::Postgres => (aiki::connect(&url).await.expect("the store opens"), None),
        Through::Server => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let config = aiki_server::ServerConfig::default().insecure_no_auth();
            let serving =
                aiki_server::serve(listener, store.clone(), config, std::future::pending());
            let server = tokio::spawn(async move { serving.await.expect("the server serves") });
            let remote = aiki::connect(&format!("http://{address}"))
                .await
                .expect("the server's store opens");
            (remote, Some(server))
        }
    };
    let worker = Worker::builder(&executor_store)
        .register(SkewTimers)
        .task(SkewFlaky)
        .clock(Skewed { by: skew })
        .daemons(false)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(20));
    let started = Instant::now();
    let run = client.start::<SkewTimers>(aiki::NoInput).await.unwrap();
    let output = tokio::time::timeout(PATIENCE, run.result())
        .await
        .unwrap_or_else(|_| panic!("a worker {skew} ms off did not finish the run"))
        .unwrap();
    let took = started.elapsed();
    assert_eq!(output, "2 None", "retried once, and the wait timed out");
    let timeline = store.timeline(run.id()).await.unwrap();
    assert_eq!(timeline.last().unwrap().to, RunStatus::Completed);
    worker.shutdown().await;
    daemons.shutdown().await;
    if let Some(server) = server {
        server.abort();
    }
    (took, timeline.iter().map(|change| change.at).collect())
}

async fn executors_an_hour_off_time_runs_as_an_accurate_one(through: Through) {
    let least = SLEEP + Duration::from_millis(RETRY_MS) + WAIT;
    for skew in [HOUR, -HOUR, 0] {
        let (took, times) = run_with_skew(skew, through).await;
        println!("{skew} ms off: {took:?}");
        assert!(
            took >= least,
            "a worker {skew} ms off ended the timers early: {took:?} < {least:?}"
        );
        let now = SystemClock.now();
        for at in times {
            assert!(
                (now - at).abs() < 60_000,
                "a worker {skew} ms off stamped a change at {at}, not the store's time ({now})"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_executors_an_hour_off_time_runs_as_an_accurate_one() {
    if !aiki_tests::postgres_available().await {
        return;
    }
    executors_an_hour_off_time_runs_as_an_accurate_one(Through::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_executors_an_hour_off_time_runs_as_an_accurate_one() {
    executors_an_hour_off_time_runs_as_an_accurate_one(Through::Server).await;
}

#[aiki::workflow(name = "skew-once", version = "1")]
async fn skew_once(_run: &Run, n: u32) -> Result<u32, WorkflowError> {
    Ok(n + 1)
}

/// What a capturing subscriber counts: the `warn` events of one message.
#[derive(Clone)]
struct Warnings {
    message: &'static str,
    seen: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        if *event.metadata().level() == tracing::Level::WARN && message.0 == self.message {
            self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// A server that claims a run for a remote worker and then goes away before the answer
/// reaches it (every request answered by a bare 502 for two seconds, as while it restarts):
/// the worker's next claim sends the lost one again and gets its first answer, whose heartbeats
/// date from before the outage. The worker runs the run, and does not take those heartbeats for
/// the store's time: before, it warned that its clock was two seconds off the store's, on one
/// machine, and timed its runs two seconds behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_answered_again_after_an_outage_moves_no_clock() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    let warnings = Warnings {
        message: "this machine's clock is off the store's: timing runs by the store's",
        seen: Arc::default(),
    };
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(warnings.clone()));
    // A second dispatcher, so that a callsite's interest is computed from every dispatcher,
    // not from the default of the thread that first hits it.
    let _second = tracing::Dispatch::new(tracing_subscriber::registry());

    let store = aiki::store::connect("memory:").await.unwrap();
    let down_until: Arc<Mutex<Option<Instant>>> = Arc::default();
    let lost = Arc::new(AtomicUsize::new(0));
    let fault = {
        let (down_until, lost) = (down_until.clone(), lost.clone());
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let (down_until, lost) = (down_until.clone(), lost.clone());
            async move {
                use axum::response::IntoResponse;
                let gone = || axum::http::StatusCode::BAD_GATEWAY.into_response();
                if down_until
                    .lock()
                    .unwrap()
                    .is_some_and(|until| Instant::now() < until)
                {
                    return gone();
                }
                let claim = request
                    .uri()
                    .path()
                    .ends_with(aiki::store::api::path::CLAIMS);
                let response = next.run(request).await;
                if !claim || lost.load(Ordering::SeqCst) > 0 {
                    return response;
                }
                let (parts, body) = response.into_parts();
                let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                if answer["runs"]
                    .as_array()
                    .is_some_and(|runs| !runs.is_empty())
                {
                    // Claimed, and the answer lost: the server is gone for two seconds.
                    lost.fetch_add(1, Ordering::SeqCst);
                    *down_until.lock().unwrap() = Some(Instant::now() + Duration::from_secs(2));
                    return gone();
                }
                axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
            }
        }
    };
    let app = aiki_server::router(
        store.clone(),
        aiki_server::ServerConfig::default().insecure_no_auth(),
    )
    .layer(axum::middleware::from_fn(fault));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(20));
    let run = client.start::<SkewOnce>(41).await.unwrap();
    let remote = aiki::connect(&format!("http://{address}")).await.unwrap();
    let worker = tracing::dispatcher::with_default(&dispatch, || {
        Worker::builder(&remote)
            .register(SkewOnce)
            .daemons(false)
            .poll_interval(Duration::from_millis(20))
            .build()
            .unwrap()
            .start()
    });
    let output = tokio::time::timeout(PATIENCE, run.result())
        .await
        .expect("the run claimed before the outage completes")
        .unwrap();
    worker.shutdown().await;
    server.abort();
    assert_eq!(output, 42);
    assert_eq!(
        lost.load(Ordering::SeqCst),
        1,
        "the claim's answer was lost"
    );
    let claims = store
        .timeline(run.id())
        .await
        .unwrap()
        .into_iter()
        .filter(|change| change.to == RunStatus::Running)
        .count();
    assert_eq!(claims, 1, "run by the claim whose answer was lost");
    assert_eq!(
        warnings.seen.load(Ordering::SeqCst),
        0,
        "a repeated answer is no reading of the store's clock"
    );
}
