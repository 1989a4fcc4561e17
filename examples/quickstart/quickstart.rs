//! The quickstart: an order-processing workflow on an embedded SQLite file, no set-up.
//!
//! ```sh
//! cargo run --example quickstart
//! ```
//!
//! It charges a card, sleeps (durably) while the order is fulfilled, waits for the carrier's
//! "shipped" event (this program sends it, as a webhook would), and sends a receipt. The state
//! lives in `aiki-quickstart.db` in the working folder: interrupt the program with Ctrl-C
//! during the sleep and start it again, and the same run resumes where it stopped; the card is
//! not charged twice. Delete the file to start over.
//!
//! With `aiki` as its first argument it is the `aiki` command with this workflow compiled in,
//! as a service's own binary offers it: `cargo run --example quickstart -- aiki check --url
//! sqlite://aiki-quickstart.db` replays the runs in flight against this code, writing nothing,
//! before a deploy (see the guide "Changing running workflows safely").

use std::time::Duration;

use aiki::{Client, Run, RunStatus, TaskError, Worker, WorkflowError};
use serde::{Deserialize, Serialize};

/// What the customer ordered.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Order {
    id: String,
    cents: u64,
    email: String,
}

/// A charge to make.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Charge {
    order_id: String,
    cents: u64,
}

/// The payment provider's receipt.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Receipt {
    transaction_id: String,
}

/// The carrier's shipping notice.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shipment {
    tracking_number: String,
}

/// An email to send.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Email {
    to: String,
    body: String,
}

/// Charges the card. Retried with exponential back-off if the provider fails.
#[aiki::task(name = "charge-card", retry = exponential(max_attempts = 3, base_delay_ms = 200))]
pub async fn charge_card(charge: Charge) -> Result<Receipt, TaskError> {
    println!(
        "  [task] charging {} cents for order {}",
        charge.cents, charge.order_id
    );
    Ok(Receipt {
        transaction_id: format!("tx-{}", charge.order_id),
    })
}

/// Sends an email.
#[aiki::task(name = "send-email")]
pub async fn send_email(email: Email) -> Result<(), TaskError> {
    println!("  [task] emailing {}: {}", email.to, email.body);
    Ok(())
}

/// The workflow: charge, wait for fulfilment, wait for the shipment, send the receipt.
#[aiki::workflow(name = "order-processing", version = "1.0.0", events(shipped = Shipment))]
pub async fn order_v1(run: &Run, order: Order) -> Result<String, WorkflowError> {
    let receipt = ChargeCard
        .start(
            run,
            Charge {
                order_id: order.id.clone(),
                cents: order.cents,
            },
        )
        .await?;
    run.sleep("wait-for-fulfillment", Duration::from_secs(3))
        .await?;
    let shipment = run.events().shipped().wait().await?;
    let body = format!(
        "order {} is on its way ({}), paid with {}",
        order.id, shipment.tracking_number, receipt.transaction_id
    );
    SendEmail
        .start(
            run,
            Email {
                to: order.email,
                body: body.clone(),
            },
        )
        .await?;
    Ok(body)
}

/// What this build serves: its worker executes from it, `aiki check` replays against it.
fn registry() -> Result<aiki::Registry, aiki::ClientError> {
    aiki::Registry::builder().register(OrderV1).build()
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    if std::env::args().nth(1).as_deref() == Some("aiki") {
        let app = aiki_cli::App::new().registry(registry()?);
        return Ok(app.main(std::env::args_os().skip(1)));
    }
    tokio::runtime::Runtime::new()?.block_on(quickstart())?;
    Ok(std::process::ExitCode::SUCCESS)
}

async fn quickstart() -> anyhow::Result<()> {
    let store = aiki::connect("sqlite://aiki-quickstart.db").await?;
    let client = Client::new(store.clone());
    // Short claim timings, so that a run interrupted mid-task is resumed quickly: the store
    // releases a claim unrefreshed for 3 s (its runtime configuration, which every worker on
    // it follows), and this worker refreshes its claims every second. A deployment sets the
    // store's configuration once, as an operator (`aiki config set`), not from its workers.
    client
        .set_config(aiki::ConfigKey::ClaimIdleTimeout, 3_000)
        .await?;
    let worker = Worker::builder(store)
        .registry(registry()?)
        .claim_refresh_interval(Duration::from_secs(1))
        .build()?
        .start();

    let order = Order {
        id: "1001".into(),
        cents: 4200,
        email: "ada@example.com".into(),
    };
    // The reference id makes the start idempotent: run again, get the same run.
    let run = client
        .start::<OrderV1>(order)
        .reference_id("order-1001")
        .await?;
    println!(
        "order-processing run {} (state in aiki-quickstart.db)",
        run.id()
    );

    let follow = async {
        let mut last = None;
        loop {
            let status = run.status().await?;
            if last != Some(status) {
                println!("status: {status}");
                if status == RunStatus::Sleeping {
                    println!("  (sleeping durably: press Ctrl-C now, then run me again)");
                }
                last = Some(status);
            }
            match status {
                RunStatus::AwaitingEvent => {
                    // The carrier's webhook, as it would arrive from outside; the reference id
                    // makes a repeated delivery harmless.
                    let shipment = Shipment {
                        tracking_number: "TRACK-42".into(),
                    };
                    if run
                        .send_once::<OrderV1Shipped>(shipment, "shipment-1001")
                        .await?
                    {
                        println!("  [webhook] sent `shipped`");
                    }
                }
                RunStatus::Completed => return anyhow::Ok(run.result().await?),
                RunStatus::Failed | RunStatus::Cancelled => {
                    anyhow::bail!("run ended {status}: {:?}", run.record().await?.error)
                }
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        result = follow => {
            let message = result?;
            println!("done: {message}");
        }
        _ = tokio::signal::ctrl_c() => {
            println!("\ninterrupted; run `cargo run --example quickstart` again to resume the same run");
        }
    }
    worker.shutdown().await;
    Ok(())
}
