//! A stalled run, requeued, is delivered again through every route a worker may hear of work
//! by: the store poll, PostgreSQL's ready hints and Redis (each worker process serving a pool of
//! its own; the hint and Redis workers poll only every 60 s). The push route's counterpart is
//! in `push.rs`.

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
async fn a_stalled_run_requeued_is_delivered_again_through_every_route() {
    if !aiki_tests::postgres_available().await {
        return;
    }
    let redis = PrivateRedis::start();
    let mut world = World::new(Backend::Postgres).await;
    let store = aiki::store::connect(&world.url)
        .await
        .expect("the store opens");
    // Runs not claimed within a second stall; the daemons run in this process.
    world
        .client
        .set_config(aiki::ConfigKey::StallMaxAge, 1_000)
        .await
        .unwrap();
    let _daemons = aiki::Worker::builder(store.clone())
        .worker_id("daemons")
        .build()
        .unwrap()
        .start();
    let _publisher = RedisPublisher::new(&redis.url(), store.clone())
        .expect("a Redis URL")
        .start();
    let redis_url = redis.url();
    let routes: [(&str, Vec<(&str, &str)>); 3] = [
        (
            "poll",
            vec![("AIKI_SUBSCRIBER", "poll"), ("AIKI_POLL_MS", "50")],
        ),
        ("notify", vec![("AIKI_POLL_MS", "60000")]),
        (
            "redis",
            vec![("AIKI_POLL_MS", "60000"), ("AIKI_REDIS_URL", &redis_url)],
        ),
    ];
    // One run per route, in the route's pool, stalled before anyone serves the pool.
    let mut runs = Vec::new();
    for (route, _) in &routes {
        let run = world
            .client
            .start::<FiveSteps>(format!("requeued-{route}"))
            .pool(*route)
            .await
            .unwrap();
        runs.push(run);
    }
    for run in &runs {
        wait_for(run, RunStatus::Stalled).await;
    }
    for (route, env) in &routes {
        let mut env = env.clone();
        env.push(("AIKI_WORKER_POOL", route));
        world.spawn_with(&format!("worker-{route}"), Duration::from_millis(100), &env);
    }
    // The workers are up, and a stalled run is not theirs to claim.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for ((route, _), run) in routes.iter().zip(&runs) {
        assert_eq!(run.record().await.unwrap().status, RunStatus::Stalled);
        let requeued = Instant::now();
        run.requeue().await.unwrap();
        wait_for(run, RunStatus::Completed).await;
        let latency = requeued.elapsed();
        println!("requeued: a stalled run requeued completed through {route} in {latency:?}");
        assert!(latency < Duration::from_secs(10), "{route}: {latency:?}");
        assert_eq!(world.count_prefix(&format!("step requeued-{route}/")), 5);
    }
}
