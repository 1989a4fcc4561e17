//! The catalog: what a worker publishes about the versions it registers, and the starts and
//! events that tools without the code (the generic `aiki` CLI) validate against it, with the
//! same errors as the typed API.

use std::time::Duration;

use aiki::store::CatalogEntry;
use aiki::{ClientError, Namespace, Run, RunStatus, Schema, TaskError, Workflow, WorkflowError};
use aiki_tests::{Backend, Harness, PATIENCE, on_every_backend};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Order {
    sku: String,
    quantity: u32,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Payment {
    amount_cents: u64,
}

#[aiki::task(name = "catalog-price", retry = fixed(max_attempts = 3, delay_ms = 10))]
async fn catalog_price(order: Order) -> Result<u64, TaskError> {
    Ok(u64::from(order.quantity) * 250)
}

#[aiki::workflow(name = "catalog-order", version = "2", events(payment_received = Payment))]
async fn catalog_order(run: &Run, order: Order) -> Result<u64, WorkflowError> {
    let price = CatalogPrice.start(run, order).await?;
    let paid = run.events().payment_received().wait().await?;
    Ok(price.min(paid.amount_cents))
}

/// The same version in a newer build: it declares one more event.
#[aiki::workflow(
    name = "catalog-order",
    version = "2",
    events(payment_received = Payment, refund_requested = Payment)
)]
async fn catalog_order_newer(run: &Run, order: Order) -> Result<u64, WorkflowError> {
    let price = CatalogPrice.start(run, order).await?;
    let paid = run.events().payment_received().wait().await?;
    Ok(price.min(paid.amount_cents))
}

#[aiki::workflow(name = "catalog-tick", version = "1")]
async fn catalog_tick(_run: &Run) -> Result<u32, WorkflowError> {
    Ok(1)
}

/// Waits (bounded) until the worker's first heartbeat has published the catalog.
async fn published(h: &Harness, namespace: &Namespace) -> CatalogEntry {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match h.client.catalog_entry(namespace).await {
            Ok(entry) => return entry,
            Err(ClientError::NotInCatalog { .. }) => {
                assert!(tokio::time::Instant::now() < deadline, "never published");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(error) => panic!("{error}"),
        }
    }
}

async fn a_worker_publishes_what_its_versions_declare(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(CatalogOrder).task(CatalogPrice))
        .await;
    let entry = published(&h, &CatalogOrder::namespace()).await;
    assert_eq!(entry.input.schema, *Schema::of::<Order>().json());
    assert_eq!(entry.input.fingerprint, Schema::of::<Order>().fingerprint());
    assert_eq!(entry.output.fingerprint, Schema::of::<u64>().fingerprint());
    let event = entry.event("payment_received").expect("declared event");
    assert_eq!(
        event.payload.fingerprint,
        Schema::of::<Payment>().fingerprint()
    );
    assert_eq!(entry.retry["kind"], "never");
    assert_eq!(entry.tasks.len(), 1);
    assert_eq!(entry.tasks[0].name, "catalog-price");
    assert_eq!(entry.tasks[0].retry["kind"], "fixed");
    assert_eq!(entry.tasks[0].retry["max_attempts"], 3);
    assert!(
        entry.published_by.starts_with("worker-"),
        "{}",
        entry.published_by
    );
    assert_eq!(entry.fingerprint.len(), 64);

    // The same code published again gives the same fingerprint; other code another one.
    h.deploy(|w| w.register(CatalogOrder).task(CatalogPrice))
        .await;
    let again = published(&h, &CatalogOrder::namespace()).await;
    assert_eq!(again.fingerprint, entry.fingerprint);
    h.deploy(|w| w.register(CatalogOrder)).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while published(&h, &CatalogOrder::namespace()).await.tasks.len() == 1 {
        assert!(tokio::time::Instant::now() < deadline, "never republished");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let other = published(&h, &CatalogOrder::namespace()).await;
    assert_ne!(other.fingerprint, entry.fingerprint, "another task list");
}

async fn json_starts_and_events_are_checked_as_typed_ones_are(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(CatalogOrder).task(CatalogPrice))
        .await;
    let namespace = CatalogOrder::namespace();
    published(&h, &namespace).await;

    // A start input that breaks the schema: the error a typed start gives for the same JSON.
    let bad = json!({"sku": "A-1", "quantity": "three"});
    let generic = h
        .client
        .start_json(namespace.clone(), bad.clone())
        .await
        .unwrap_err();
    let typed = aiki::Schema::of::<Order>().validate(&bad).unwrap_err();
    match &generic {
        ClientError::InvalidInput { what, message } => {
            assert_eq!(what, "input of catalog-order@2");
            assert_eq!(message, &typed, "the typed schema's own complaint");
        }
        other => panic!("{other}"),
    }
    assert!(generic.to_string().contains("quantity"), "{generic}");

    // A version missing from the catalog is refused, naming what the catalog has.
    let missing = h
        .client
        .start_json(Namespace::new("catalog-order", "3"), json!({}))
        .await
        .unwrap_err();
    assert!(
        matches!(&missing, ClientError::NotInCatalog { namespace, known }
            if namespace == "catalog-order@3" && known.contains("catalog-order@2")),
        "{missing}"
    );

    // A good input starts the run; the reference id makes the start idempotent.
    let good = json!({"sku": "A-1", "quantity": 3});
    let run = h
        .client
        .start_json(namespace.clone(), good.clone())
        .reference_id("order-1")
        .await
        .unwrap();
    let again = h
        .client
        .start_json(namespace.clone(), good)
        .reference_id("order-1")
        .await
        .unwrap();
    assert_eq!(run.id(), again.id());
    let typed = h.client.handle::<CatalogOrder>(run.id());
    h.reach(&typed, RunStatus::AwaitingEvent).await;

    // Event payloads: the same errors as the typed handle's, for a bad payload and an
    // undeclared name.
    let bad = json!({"amount_cents": -5});
    let generic = run
        .send_json("payment_received", bad.clone(), None)
        .await
        .unwrap_err();
    let typed_error = typed
        .send_json("payment_received", bad, None)
        .await
        .unwrap_err();
    assert_eq!(generic.to_string(), typed_error.to_string());
    assert!(
        matches!(&generic, ClientError::InvalidInput { what, .. }
            if what == "event `payment_received` for catalog-order@2"),
        "{generic}"
    );
    let generic = run.send_json("refund", json!({}), None).await.unwrap_err();
    let typed_error = typed
        .send_json("refund", json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(generic.to_string(), typed_error.to_string());
    assert!(
        matches!(generic, ClientError::UnknownEvent { .. }),
        "{generic}"
    );
    assert_eq!(
        typed.status().await.unwrap(),
        RunStatus::AwaitingEvent,
        "nothing recorded"
    );

    // A good payload is delivered once per reference id (sent while no worker serves the run,
    // so the second send meets a run that has not ended), and the run completes.
    h.deploy(|w| w).await;
    let payment = json!({"amount_cents": 700});
    assert!(
        run.send_json("payment_received", payment.clone(), Some("pay-1".into()))
            .await
            .unwrap()
    );
    assert!(
        !run.send_json("payment_received", payment, Some("pay-1".into()))
            .await
            .unwrap()
    );
    h.deploy(|w| w.register(CatalogOrder).task(CatalogPrice))
        .await;
    assert_eq!(
        tokio::time::timeout(PATIENCE, typed.result())
            .await
            .expect("in time")
            .unwrap(),
        700
    );
}

async fn a_json_start_hashes_its_input_as_the_typed_start_does(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(CatalogTick).register(CatalogOrder))
        .await;
    published(&h, &CatalogTick::namespace()).await;
    // Same reference id, same input: the same run, whichever API started it.
    let typed = h
        .client
        .start::<CatalogTick>(aiki::NoInput)
        .reference_id("tick-1")
        .await
        .unwrap();
    let generic = h
        .client
        .start_json(CatalogTick::namespace(), serde_json::Value::Null)
        .reference_id("tick-1")
        .await
        .unwrap();
    assert_eq!(generic.id(), typed.id());
    let order = Order {
        sku: "B-2".into(),
        quantity: 1,
    };
    let typed = h
        .client
        .start::<CatalogOrder>(order)
        .reference_id("order-2")
        .await
        .unwrap();
    let generic = h
        .client
        .start_json(
            CatalogOrder::namespace(),
            json!({"quantity": 1, "sku": "B-2"}),
        )
        .reference_id("order-2")
        .await
        .unwrap();
    assert_eq!(generic.id(), typed.id());
    // Another input under the reference id is the typed API's conflict.
    let conflict = h
        .client
        .start_json(
            CatalogOrder::namespace(),
            json!({"quantity": 2, "sku": "B-2"}),
        )
        .reference_id("order-2")
        .await
        .unwrap_err();
    assert!(
        matches!(conflict, ClientError::ReferenceConflict { existing, .. } if existing == typed.id()),
        "{conflict}"
    );
}

/// A rolling deploy runs two builds of one version: an older pod restarting republishes its
/// build's entry, and the newer build's stays; an event only the newer declares is accepted
/// while a live worker runs it. The tasks a version's runs call are listed even when the
/// worker did not declare them one by one.
async fn two_live_builds_of_a_version_are_both_kept(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let namespace = CatalogOrder::namespace();
    let fast = |w: aiki::WorkerBuilder| w.claim_refresh_interval(Duration::from_millis(50));
    let newer = fast(h.worker_builder())
        .register(CatalogOrderNewer)
        .task(CatalogPrice)
        .build()
        .unwrap()
        .start();
    let newer_entry = published(&h, &namespace).await;
    assert!(newer_entry.event("refund_requested").is_some());
    // An older pod restarts after the newer one published: it republishes its own build.
    h.deploy(|w| fast(w).register(CatalogOrder)).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let builds = h.client.catalog_entries(&namespace).await.unwrap();
        if builds.len() == 2 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{builds:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let run = h
        .client
        .start_json(namespace.clone(), json!({"sku": "A-1", "quantity": 2}))
        .await
        .unwrap();
    h.reach(
        &h.client.handle::<CatalogOrder>(run.id()),
        RunStatus::AwaitingEvent,
    )
    .await;
    assert!(
        run.send_json("refund_requested", json!({"amount_cents": 5}), None)
            .await
            .unwrap(),
        "the newer build, live, declares it"
    );
    let unknown = run
        .send_json("no_such_event", json!({}), None)
        .await
        .unwrap_err();
    assert!(
        matches!(unknown, ClientError::UnknownEvent { .. }),
        "{unknown}"
    );
    run.send_json("payment_received", json!({"amount_cents": 400}), None)
        .await
        .unwrap();
    assert_eq!(
        run.wait_until_ended().await.unwrap().status,
        RunStatus::Completed
    );
    newer.shutdown().await;
    // The older build declared no task, but its runs call one (this run is the older build's
    // alone): the catalog lists it.
    let run = h
        .client
        .start_json(namespace.clone(), json!({"sku": "A-2", "quantity": 1}))
        .await
        .unwrap();
    h.reach(
        &h.client.handle::<CatalogOrder>(run.id()),
        RunStatus::AwaitingEvent,
    )
    .await;
    run.send_json("payment_received", json!({"amount_cents": 200}), None)
        .await
        .unwrap();
    assert_eq!(
        run.wait_until_ended().await.unwrap().status,
        RunStatus::Completed
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let builds = h.client.catalog_entries(&namespace).await.unwrap();
        let older = builds
            .iter()
            .find(|entry| entry.event("refund_requested").is_none())
            .expect("the older build");
        if older.tasks.iter().any(|task| task.name == "catalog-price") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{older:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A live worker of a release that does not say which build it runs may run any of them: the
/// builds it may run are not hidden by the newer one a worker says it runs.
async fn a_live_worker_of_an_older_release_keeps_every_build(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let namespace = CatalogOrder::namespace();
    h.deploy(|w| w.register(CatalogOrderNewer).task(CatalogPrice))
        .await;
    let newer = published(&h, &namespace).await;
    // The worker's row says which build it runs once its first heartbeat is written.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let now = aiki::Clock::now(&aiki::SystemClock);
        let workers = h.store.list_workers(now, 60_000).await.unwrap();
        let key = namespace.to_string();
        if workers.iter().any(|w| w.fingerprints.contains_key(&key)) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{workers:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let schema = aiki::store::SchemaRecord::new(json!({}), "any");
    let older = CatalogEntry::new(namespace.clone(), schema.clone(), schema.clone())
        .fingerprint("older-build")
        .events(vec![aiki::store::EventDeclaration::new(
            "legacy_note",
            schema,
        )])
        .published_by("older-pod");
    h.store
        .publish_catalog(older, aiki::Clock::now(&aiki::SystemClock))
        .await
        .unwrap();
    let builds = |entries: Vec<CatalogEntry>| {
        let mut builds: Vec<String> = entries.into_iter().map(|e| e.fingerprint).collect();
        builds.sort();
        builds
    };
    assert_eq!(
        builds(h.client.catalog_entries(&namespace).await.unwrap()),
        std::slice::from_ref(&newer.fingerprint),
        "only the build live workers say they run"
    );
    let now = aiki::Clock::now(&aiki::SystemClock);
    h.store
        .record_worker(
            aiki::store::WorkerRecord::new(
                "older-pod",
                "host",
                1,
                vec![namespace.clone()],
                "default",
                now,
            ),
            now,
        )
        .await
        .unwrap();
    let mut expected = vec![newer.fingerprint, "older-build".to_owned()];
    expected.sort();
    assert_eq!(
        builds(h.client.catalog_entries(&namespace).await.unwrap()),
        expected
    );
}

/// A client that keeps the catalog (as a server does for the starts and events it checks)
/// checks against what it read until that is older than it keeps it: a newer build published
/// meanwhile is not seen by it, and is by a client that keeps nothing.
async fn a_client_that_keeps_the_catalog_checks_against_what_it_read(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let namespace = CatalogOrder::namespace();
    h.deploy(|w| w.register(CatalogOrder)).await;
    published(&h, &namespace).await;
    let refund = json!({"amount_cents": 5});
    let kept =
        aiki::Client::new(h.client.store().clone()).keep_catalog_for(Duration::from_secs(3600));
    let unknown = kept
        .check_event_json(&namespace, "refund_requested", &refund)
        .await
        .unwrap_err();
    assert!(
        matches!(unknown, ClientError::UnknownEvent { .. }),
        "{unknown}"
    );
    h.deploy(|w| w.register(CatalogOrderNewer).task(CatalogPrice))
        .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while let Err(error) = h
        .client
        .check_event_json(&namespace, "refund_requested", &refund)
        .await
    {
        assert!(tokio::time::Instant::now() < deadline, "{error}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let still = kept
        .check_event_json(&namespace, "refund_requested", &refund)
        .await
        .unwrap_err();
    assert!(matches!(still, ClientError::UnknownEvent { .. }), "{still}");
    aiki::Client::new(h.client.store().clone())
        .keep_catalog_for(Duration::ZERO)
        .check_event_json(&namespace, "refund_requested", &refund)
        .await
        .expect("a client that keeps nothing reads the newer build");
}

on_every_backend!(
    a_client_that_keeps_the_catalog_checks_against_what_it_read,
    a_live_worker_of_an_older_release_keeps_every_build,
    two_live_builds_of_a_version_are_both_kept,
    a_json_start_hashes_its_input_as_the_typed_start_does,
    a_worker_publishes_what_its_versions_declare,
    json_starts_and_events_are_checked_as_typed_ones_are,
);
