//! An aiki server process restarted under load: two remote worker processes run 500 parents
//! of two children each through a server that is stopped three times (`kill -9`, or SIGTERM
//! and its graceful shutdown), each time while at least 50 requests are in flight, and started
//! again on the same address five seconds later. A fault proxy in front of the server counts
//! the requests in flight. Claims time out after a minute, so a run whose claim was lost with
//! a request would wait for claim recovery: the test counts those (the store's own releases of
//! a running run), the duplicate-key refusals the workers logged, and the recorded tasks that
//! ran again. All three must be 0.

use std::path::Path;
use std::time::{Duration, Instant};

use aiki::store::{ListRuns, RunFilter};
use aiki::{RunId, RunStatus};
use aiki_tests::Backend;
use aiki_tests::crash::{FiveSteps, WithChildren};
use aiki_tests::processes::wait_for;
use aiki_tests::proxy::FaultProxy;

use super::SERIAL;
use super::world::{Server, Serving, World, server_process};

/// How a server is stopped.
#[derive(Clone, Copy, Debug)]
pub(super) enum Stop {
    /// `kill -9`: requests in flight die with it.
    Kill,
    /// SIGTERM: it drains the requests in flight and exits.
    Terminate,
}

const RUNS: usize = 500;
const STOPS: usize = 3;
const DOWN: Duration = Duration::from_secs(5);
const IN_FLIGHT: i64 = 50;
/// The claims' idle timeout: a run waiting for claim recovery would wait this long.
const CLAIM_IDLE: Duration = Duration::from_secs(60);

pub(super) async fn remote_workers_ride_out_server_restarts(backend: Backend, stop: Stop) {
    let _serial = SERIAL.lock().await;
    let mut world = World::new(backend).await;
    let key = world.worker_key().await;
    let logs = tempdir();
    let (child, server_url) = server_process(&world.url, "127.0.0.1:0");
    let listen = server_url.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(listen.parse().expect("an address"))
        .await
        .expect("the proxy starts");
    world.server = Some(Server {
        url: format!("http://127.0.0.1:{}", proxy.port()),
        key,
        runs: Serving::Process(child),
    });
    let idle = CLAIM_IDLE.as_millis().to_string();
    for i in 0..2 {
        let id = format!("remote-{i}");
        let mut command = world.worker_command(
            &id,
            Duration::from_millis(200),
            &[
                ("AIKI_CLAIM_IDLE_MS", idle.as_str()),
                ("AIKI_CLAIM_REFRESH_MS", "2000"),
                ("AIKI_LOG", "warn"),
            ],
        );
        command.stderr(std::fs::File::create(logs.join(format!("{id}.log"))).unwrap());
        world.workers.spawn(command);
    }
    let mut handles = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        handles.push(
            world
                .client
                .start::<WithChildren>(format!("p{i}"))
                .await
                .unwrap(),
        );
    }
    let started = Instant::now();
    for n in 1..=STOPS {
        let most = until_in_flight(&proxy).await;
        let completed = completed(&world).await;
        let took = stop_server(&mut world, stop);
        println!(
            "[{backend:?}, {stop:?}] stop {n}: {most} requests in flight, {completed} runs \
             completed; the server exited {took:?} after the signal"
        );
        assert!(
            completed < RUNS * 3,
            "the load ended before stop {n}: the test measures nothing"
        );
        tokio::time::sleep(DOWN.saturating_sub(took)).await;
        let (child, _) = server_process(&world.url, &listen);
        world.server.as_mut().unwrap().runs = Serving::Process(child);
    }
    let restarted = Instant::now();
    for handle in &handles {
        let done = wait_for(handle, RunStatus::Completed).await;
        assert_eq!(done.output, Some(serde_json::json!(6)));
    }
    let after_restart = restarted.elapsed();
    let recovered = claim_recoveries(&world).await;
    // PostgreSQL's words and SQLite's.
    let duplicate_keys = logged(&logs, "duplicate key") + logged(&logs, "UNIQUE constraint failed");
    let lost = logged(&logs, "run lost by this executor") + logged(&logs, "the claim will expire");
    let effects = world.effects();
    let again: Vec<_> = effects.iter().filter(|(_, n)| **n > 1).collect();
    println!(
        "[{backend:?}, {stop:?}] {RUNS} parents and {} children completed in {:?} ({:?} after \
         the last restart): {} runs waited for claim recovery, {duplicate_keys} duplicate-key \
         errors, {lost} runs given up by their executor, {} recorded tasks ran again",
        RUNS * 2,
        started.elapsed(),
        after_restart,
        recovered.len(),
        again.len()
    );
    assert_eq!(effects.len(), RUNS * 6, "every task ran");
    assert!(
        recovered.is_empty(),
        "runs waited for claim recovery: {recovered:?}"
    );
    assert_eq!(
        duplicate_keys, 0,
        "duplicate-key errors in the workers' logs"
    );
    assert_eq!(
        lost, 0,
        "runs given up by their executor while the claim was live"
    );
    assert!(again.is_empty(), "recorded tasks ran again: {again:?}");
    assert!(
        after_restart < CLAIM_IDLE,
        "the runs took a claim timeout to complete"
    );
}

/// Waits until at least [`IN_FLIGHT`] requests are in flight through `proxy`; the most seen.
async fn until_in_flight(proxy: &FaultProxy) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut most = 0;
    loop {
        let now = proxy.requests_in_flight();
        most = most.max(now);
        if now >= IN_FLIGHT {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "never {IN_FLIGHT} requests in flight (at most {most})"
        );
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// Stops the world's server process; how long it took to exit.
fn stop_server(world: &mut World, stop: Stop) -> Duration {
    let server = world.server.as_mut().expect("a server");
    let Serving::Process(child) = &mut server.runs else {
        panic!("the server runs in this process");
    };
    let signalled = Instant::now();
    match stop {
        Stop::Kill => child.kill().expect("kill -9"),
        Stop::Terminate => {
            let status = std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .expect("kill runs");
            assert!(status.success());
        }
    }
    let deadline = signalled + Duration::from_secs(30);
    loop {
        if child.try_wait().expect("its status").is_some() {
            return signalled.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit within 30 s of {stop:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How many runs have completed (parents and children).
async fn completed(world: &World) -> usize {
    let counts = world.client.store().run_counts().await.unwrap();
    counts
        .iter()
        .flat_map(|counts| counts.by_status.iter())
        .filter(|(status, _)| *status == RunStatus::Completed)
        .map(|(_, count)| usize::try_from(*count).unwrap())
        .sum()
}

/// The runs that waited for claim recovery: held in `running` for more than half the claims'
/// idle timeout (their steps take milliseconds; a run that waits suspends), which only a
/// claim that no live executor works on is. (The timeline does not tell recovery's release
/// from an executor's hand-back: both name the claim's owner.)
async fn claim_recoveries(world: &World) -> Vec<RunId> {
    let store = world.client.store();
    let mut recovered = Vec::new();
    let mut page = store
        .list_runs(ListRuns::new(RunFilter::default(), 500))
        .await
        .unwrap();
    loop {
        for run in &page.runs {
            let timeline = store.timeline(run.id).await.unwrap();
            let held_too_long = timeline.windows(2).any(|pair| {
                pair[0].to == RunStatus::Running
                    && pair[1].at - pair[0].at > i64::try_from(CLAIM_IDLE.as_millis() / 2).unwrap()
            });
            if held_too_long {
                recovered.push(run.id);
            }
        }
        let Some(next) = page.next.take() else { break };
        page = store
            .list_runs(ListRuns::new(RunFilter::default(), 500).after(Some(next)))
            .await
            .unwrap();
    }
    recovered
}

/// How many lines of the logs in `folder` contain `text`.
fn logged(folder: &Path, text: &str) -> usize {
    std::fs::read_dir(folder)
        .unwrap()
        .map(|file| std::fs::read_to_string(file.unwrap().path()).unwrap_or_default())
        .map(|log| log.lines().filter(|line| line.contains(text)).count())
        .sum()
}

/// A fresh folder for the processes' logs.
fn tempdir() -> std::path::PathBuf {
    let folder = std::env::temp_dir().join(format!("aiki-restarts-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

/// How long the server stays down in [`starts_ride_out_a_server_restart`].
const RESTART: Duration = Duration::from_secs(10);

/// A client on a server process that is killed and started again ten seconds later: the
/// starts and actions made meanwhile wait for it and are each done once; a client that rides
/// out less than the outage fails with a typed error after its bound.
pub(super) async fn starts_ride_out_a_server_restart(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::through_a_server_process(backend).await;
    let server = world.server.as_ref().unwrap();
    let remote = |ride_out: Duration| {
        let store = aiki::store::http::HttpStore::new(&server.url)
            .unwrap()
            .with_key(server.key.clone());
        aiki::Client::new(std::sync::Arc::new(store)).ride_out(ride_out)
    };
    let patient = remote(aiki::DEFAULT_RIDE_OUT);
    let hasty = remote(Duration::from_secs(2));
    let first = patient
        .start::<FiveSteps>("before".to_owned())
        .await
        .unwrap();
    let listen = server.url.trim_start_matches("http://").to_owned();
    stop_server(&mut world, Stop::Kill);
    let down = Instant::now();
    // While it is down: ten starts and a cancel, all sent before it comes back.
    let starts = (0..10).map(|i| {
        let patient = patient.clone();
        tokio::spawn(async move { patient.start::<FiveSteps>(format!("during-{i}")).await })
    });
    let starts: Vec<_> = starts.collect();
    let cancel = {
        let handle = patient.handle::<FiveSteps>(first.id());
        tokio::spawn(async move { handle.cancel().await })
    };
    let refused = hasty.start::<FiveSteps>("hasty".to_owned()).await;
    let waited = down.elapsed();
    match refused {
        Err(aiki::ClientError::Store(aiki::StoreError::Unavailable { message, .. })) => {
            assert!(message.contains("after 2s"), "{message}");
        }
        other => panic!("a client riding out 2 s is refused after them: {other:?}"),
    }
    assert!(
        waited >= Duration::from_secs(2) && waited < RESTART,
        "refused after {waited:?}"
    );
    tokio::time::sleep(RESTART.saturating_sub(down.elapsed())).await;
    let (child, _) = server_process(&world.url, &listen);
    world.server.as_mut().unwrap().runs = Serving::Process(child);
    let mut started = Vec::new();
    for start in starts {
        started.push(start.await.unwrap().expect("a start rides out the restart"));
    }
    let cancelled = cancel
        .await
        .unwrap()
        .expect("a cancel rides out the restart");
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    println!(
        "[{backend:?}] 10 starts and a cancel made while the server was down for {RESTART:?} \
         were done when it came back, {:?} after it went down; a client riding out 2 s was \
         refused after {waited:?}",
        down.elapsed()
    );
    let runs = world
        .client
        .list_runs(RunFilter::default(), None, 100)
        .await
        .unwrap()
        .runs;
    assert_eq!(runs.len(), 11, "each start made one run: {runs:?}");
}
