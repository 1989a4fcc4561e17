//! A server's connections under a flood of idle sockets: 20,000 connections that never send a
//! request, opened against a real server process (`aiki_test_server`, `aiki_server::serve` with
//! the default limits: 4,096 connections, a 10 s header-read timeout) from helper processes
//! (`aiki_test_idle_sockets`, so that no process needs 20,000 descriptors of its own). `/health`
//! answers within 1 s throughout, on a new connection each time, and the server's resident
//! memory afterwards stays under 150 MiB (it passed 1.2 GB before the limits).

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SOCKETS: usize = 20_000;
const HOLD_SECONDS: u64 = 15;
const RESIDENT_AFTER_MIB: u64 = 150;

/// The server's resident memory, in MiB.
fn resident_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib / 1024)
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_leave_health_answering_and_memory_bounded() {
    let db = std::env::temp_dir().join(format!("aiki-connections-{}.db", uuid::Uuid::new_v4()));
    let mut server = Killed(
        Command::new(env!("CARGO_BIN_EXE_aiki_test_server"))
            .env(
                "AIKI_SERVER_STORE_URL",
                format!("sqlite://{}", db.display()),
            )
            .stdout(Stdio::piped())
            .spawn()
            .expect("the server starts"),
    );
    let pid = server.0.id();
    let mut lines = std::io::BufReader::new(server.0.stdout.take().unwrap()).lines();
    let address = loop {
        let line = lines.next().expect("the server says where").unwrap();
        if let Some(url) = line.strip_prefix("listening on http://") {
            break url.to_owned();
        }
    };
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let health = format!("http://{address}/api/v1/health");
    let healthy = || async {
        let answer = http.get(&health).send().await;
        answer.is_ok_and(|answer| answer.status().is_success())
    };
    for _ in 0..20 {
        assert!(healthy().await);
    }
    let before = resident_mib(pid);

    // Each helper holds what its descriptors allow (10,000 where they can).
    let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    let each = (hard.saturating_sub(200) as usize).clamp(1, 10_000);
    let mut holders = Vec::new();
    let mut left = SOCKETS;
    while left > 0 {
        let count = left.min(each);
        left -= count;
        holders.push(Killed(
            Command::new(env!("CARGO_BIN_EXE_aiki_test_idle_sockets"))
                .args([address.clone(), count.to_string(), HOLD_SECONDS.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("a helper starts"),
        ));
    }
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut probes = 0;
    let mut peak = before;
    while started.elapsed() < Duration::from_secs(HOLD_SECONDS + 3) {
        let sent = Instant::now();
        let answered = http.get(&health).send().await;
        let took = sent.elapsed();
        assert!(
            answered
                .as_ref()
                .is_ok_and(|answer| answer.status().is_success()),
            "/health after {:?} of the flood: {answered:?}",
            started.elapsed()
        );
        assert!(took < Duration::from_secs(1), "/health took {took:?}");
        slowest = slowest.max(took);
        probes += 1;
        peak = peak.max(resident_mib(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut held = 0;
    for holder in &mut holders {
        let _ = holder.0.wait();
        let mut out = String::new();
        std::io::Read::read_to_string(holder.0.stdout.as_mut().unwrap(), &mut out).unwrap();
        held += out
            .trim()
            .strip_prefix("held ")
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(healthy().await, "/health after the flood");
    let after = resident_mib(pid);
    eprintln!(
        "connections: {held} idle sockets held from {} helpers; {probes} /health probes, the \
         slowest {slowest:?}; resident memory {before} MiB before, {peak} MiB at most during, \
         {after} MiB after",
        holders.len()
    );
    assert!(held >= SOCKETS * 9 / 10, "only {held} sockets were opened");
    assert!(
        after < RESIDENT_AFTER_MIB,
        "{after} MiB resident after the flood (at most {RESIDENT_AFTER_MIB})"
    );
    drop(server);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}
