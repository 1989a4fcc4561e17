//! The printed report of a full run.

use serde_json::{Value, json};

use super::{engine, footprint, long_run};

pub(crate) fn f(value: &Value) -> f64 {
    value.as_f64().unwrap_or(f64::NAN)
}

pub(crate) fn ms(value: &Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0} ms"))
}

pub(crate) fn print_report(report: &Value) {
    println!();
    println!(
        "Aiki bench ({} mode), {} cores",
        report["mode"].as_str().unwrap_or("?"),
        report["cores"]
    );
    for replay in report["replay"].as_array().into_iter().flatten() {
        println!(
            "  replay, memory store, {} recorded tasks, {:<28} {:>7.2} µs/task \
             (recording: {:.2} µs/task; claim → completed {})",
            replay["tasks"],
            if replay["schema_changed"] == json!(true) {
                "(b) schema validation:"
            } else {
                "(a) fast path:"
            },
            f(&replay["us_per_task"]),
            f(&replay["recording_us_per_task"]),
            ms(&replay["claim_to_completed_ms"]),
        );
    }
    for skipped in report["skipped"].as_array().into_iter().flatten() {
        println!("  {}", skipped.as_str().unwrap_or_default());
    }
    for backend in report["backends"].as_array().into_iter().flatten() {
        let raw = f(&backend["raw_commits_per_s"]);
        let limits = &backend["limits"];
        let ratios = |row: &Value| engine::describe(limits, &row["ratios"]);
        println!();
        println!("  {}", backend["backend"].as_str().unwrap_or("?"));
        engine::print(limits, raw);
        println!(
            "    the same through a 1-connection sqlx pool: {:.0} /s ({:.2} × sqlx 1 conn); without \
             test_before_acquire: {:.0} /s ({:.2} ×)",
            f(&backend["pool_commits_per_s"]),
            f(&backend["pool_commits_per_s"]) / raw,
            f(&backend["pool_without_test_before_acquire_commits_per_s"]),
            f(&backend["pool_without_test_before_acquire_commits_per_s"]) / raw,
        );
        for t in backend["throughput"].as_array().into_iter().flatten() {
            println!(
                "    throughput, {} worker process(es), {} runs × 10 tasks: {:>7.0} runs/s, \
                 {:>7.0} steps/s   ({})",
                t["workers"],
                t["runs"],
                f(&t["runs_per_s"]),
                f(&t["steps_per_s"]),
                ratios(t),
            );
        }
        let fan = &backend["fan_out"];
        println!(
            "    fan-out, 1 run × {} concurrent tasks: {:.0} ms, {:.0} tasks/s   ({})",
            fan["tasks"],
            f(&fan["wall_ms"]),
            f(&fan["tasks_per_s"]),
            ratios(fan),
        );
        println!(
            "    bytes per task entry: {}",
            footprint::describe(&backend["bytes_per_entry"])
        );
        let long = &backend["long_run"];
        println!(
            "    per-step cost, one run of {} sequential tasks: {}",
            long["steps"],
            long_run::describe(long)
        );
        let rec = &backend["recovery"];
        println!(
            "    recovery, 1000 recorded tasks, fresh process: {} from process start \
             (ready after {}), {} from claim to completed",
            ms(&rec["process_start_to_completed_ms"]),
            ms(&rec["process_start_to_ready_ms"]),
            ms(&rec["claim_to_completed_ms"]),
        );
        let acc = &backend["accounting"];
        println!(
            "    in-process worker, {} runs already queued: {:.0} steps/s ({}); \
             statements: {:.1} per start, {:.1} per task step, {:.0}/s while executing, \
             {}/s from an idle worker",
            acc["runs"],
            f(&acc["in_process_steps_per_s"]),
            ratios(acc),
            f(&acc["statements_per_start"]),
            f(&acc["statements_per_step_executing"]),
            f(&acc["statements_per_s"]),
            acc["idle_worker_statements_per_s"],
        );
        let lat = &backend["latency"];
        println!(
            "    latency, one-task run start → completed ({} runs): p50 {} p99 {} \
             (observed by polling: p50 {:.1} ms, p99 {:.1} ms)",
            lat["runs"],
            ms(&lat["start_to_completed_p50_ms"]),
            ms(&lat["start_to_completed_p99_ms"]),
            f(&lat["observed_p50_ms"]),
            f(&lat["observed_p99_ms"]),
        );
        println!(
            "    wake-up p50 ({} runs each): sleep(50 ms) timer due → completed {}; \
             send → completed {}",
            lat["wake_runs"],
            ms(&lat["timer_wake_p50_ms"]),
            ms(&lat["send_wake_p50_ms"]),
        );
        let served = &backend["server"];
        for t in served["throughput"].as_array().into_iter().flatten() {
            println!(
                "    through one server, {} remote worker process(es), {} runs × 10 tasks: \
                 {:>7.0} steps/s   ({:.2} × direct; {}); the starts took {:.1} s",
                t["workers"],
                t["runs"],
                f(&t["steps_per_s"]),
                f(&t["ratio_to_direct"]),
                ratios(t),
                f(&t["start_seconds"]),
            );
        }
        let lat = &served["latency"];
        println!(
            "    through one server, one-task run ({} runs): start → completed p50 {} p99 {}; \
             long-poll wake-up, start → claimed p50 {} p99 {}",
            lat["runs"],
            ms(&lat["start_to_completed_p50_ms"]),
            ms(&lat["start_to_completed_p99_ms"]),
            ms(&lat["start_to_claimed_p50_ms"]),
            ms(&lat["start_to_claimed_p99_ms"]),
        );
    }
    println!();
    println!("  total time: {:.1} s", f(&report["seconds"]));
}
