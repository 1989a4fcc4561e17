//! `--recovery`: the recovery phase (a run with 1,000 recorded tasks finished by a fresh worker
//! process) repeated on fresh stores, so that one figure is a distribution and not one sample
//! of a noisy machine: every repeat's claim → completed and process start → completed, and
//! their medians.

use serde_json::{Value, json};

use crate::{Backend, Stores, recovery_phase};

pub(crate) async fn measure(backend: Backend, repeats: usize) -> anyhow::Result<Value> {
    let mut stores = Stores::new(backend)?;
    let mut rows = Vec::with_capacity(repeats);
    for repeat in 0..repeats {
        eprintln!("[{}] recovery {}/{repeats}", backend.name(), repeat + 1);
        let url = stores.fresh_url(&format!("recovery{repeat}")).await?;
        match recovery_phase(&url).await {
            Ok(row) => rows.push(row),
            Err(error) => {
                stores.cleanup().await?;
                return Err(error);
            }
        }
    }
    stores.cleanup().await?;
    let median = |key: &str| {
        let mut values: Vec<f64> = rows.iter().filter_map(|row| row[key].as_f64()).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    Ok(json!({
        "backend": backend.name(),
        "tasks": 1000,
        "repeats": rows,
        "median_claim_to_completed_ms": median("claim_to_completed_ms"),
        "median_process_start_to_completed_ms": median("process_start_to_completed_ms"),
    }))
}

pub(crate) fn print(backend: &str, result: &Value) {
    let figures = |key: &str| {
        result["repeats"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|row| row[key].to_string())
                    .collect::<Vec<_>>()
                    .join(" · ")
            })
            .unwrap_or_default()
    };
    println!("{backend}: recovery of a run with 1,000 recorded tasks by a fresh worker process");
    println!(
        "  claim → completed, ms: {} (median {})",
        figures("claim_to_completed_ms"),
        result["median_claim_to_completed_ms"]
    );
    println!(
        "  process start → completed, ms: {} (median {})",
        figures("process_start_to_completed_ms"),
        result["median_process_start_to_completed_ms"]
    );
}
