//! Delivery through Redis with real parts: a private `redis-server` on a free port (never the
//! shared one), worker processes hearing of work only through it (their store poll every 60 s,
//! beyond every latency asserted here) and a publisher in this process. Redis is killed and
//! restarted empty under load (no run lost, no task run twice), and killed while the workers
//! are idle and runs are started (once it is back, the publisher republishes the queued runs
//! and the workers take them within seconds, not at their poll).

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::time::{Duration, Instant};

use aiki::RunStatus;
use aiki::redis::RedisPublisher;
use aiki_tests::Backend;
use aiki_tests::crash::FiveSteps;
use aiki_tests::processes::wait_for;
use aiki_tests::redis::PrivateRedis;

// The world of the process tests; this test uses part of it.
#[allow(dead_code)]
#[path = "processes/world.rs"]
mod world;

use world::World;

#[allow(dead_code)]
const PATIENCE: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_under_load_and_while_idle_loses_nothing_and_runs_nothing_twice() {
    if !aiki_tests::postgres_available().await {
        return;
    }
    let mut redis = PrivateRedis::start();
    let mut world = World::new(Backend::Postgres).await;
    let store = aiki::connect(&world.url).await.expect("the store opens");
    let _publisher = RedisPublisher::new(&redis.url(), store.clone())
        .expect("a Redis URL")
        .start();
    for worker in ["worker-a", "worker-b"] {
        world.spawn_with(
            worker,
            Duration::from_millis(200),
            &[("AIKI_REDIS_URL", &redis.url()), ("AIKI_POLL_MS", "60000")],
        );
    }

    // Under load: 200 runs of five steps; Redis killed once a fifth of the steps ran.
    let mut runs = Vec::new();
    for i in 0..200 {
        runs.push(
            world
                .client
                .start::<FiveSteps>(format!("load-{i}"))
                .await
                .unwrap(),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while world.count_prefix("step load-") < 200 {
        assert!(Instant::now() < deadline, "the workers never got going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    redis.kill_9();
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.restart();
    let restarted = Instant::now();
    for run in &runs {
        wait_for(run, RunStatus::Completed).await;
    }
    println!(
        "redis: restarted under load, the last of 200 runs completed {:?} after",
        restarted.elapsed()
    );

    // Idle workers; Redis down while 20 runs start, so the publisher cannot publish them.
    tokio::time::sleep(Duration::from_secs(1)).await;
    redis.kill_9();
    let mut late = Vec::new();
    for i in 0..20 {
        late.push(
            world
                .client
                .start::<FiveSteps>(format!("late-{i}"))
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.restart();
    let restarted = Instant::now();
    for run in &late {
        wait_for(run, RunStatus::Completed).await;
    }
    let recovered = restarted.elapsed();
    println!(
        "redis: restarted empty with 20 runs queued, all completed {recovered:?} after (store poll 60 s)"
    );
    assert!(recovered < Duration::from_secs(20), "{recovered:?}");

    // Every step of every run ran exactly once.
    let effects = world.effects();
    let steps: Vec<_> = effects
        .iter()
        .filter(|(line, _)| line.starts_with("step "))
        .collect();
    assert_eq!(steps.len(), 220 * 5, "every step ran");
    let twice: Vec<_> = steps.iter().filter(|(_, count)| **count != 1).collect();
    assert!(twice.is_empty(), "steps run more than once: {twice:?}");
    println!("redis: 220 runs, 1100 steps, 0 lost, 0 run twice");

    // What was claimed is taken out of the set again.
    let key = aiki::redis::queue_key(&aiki::store::Namespace::new("five-steps", "1"), "default");
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis.cardinality(&key).await > 0 {
        assert!(Instant::now() < deadline, "claimed runs were left in {key}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
