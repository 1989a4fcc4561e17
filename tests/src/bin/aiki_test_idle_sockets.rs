//! Opens idle connections to a server and holds them, as a flood of clients that never send a
//! request would: `aiki_test_idle_sockets ADDRESS COUNT SECONDS` connects COUNT times to
//! ADDRESS (raising its own descriptor limit to allow them), prints `held N` (the connections
//! made), holds them for SECONDS and exits, closing them all.

use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = || anyhow::anyhow!("usage: aiki_test_idle_sockets ADDRESS COUNT SECONDS");
    let address: std::net::SocketAddr = args.next().ok_or_else(usage)?.parse()?;
    let count: usize = args.next().ok_or_else(usage)?.parse()?;
    let seconds: u64 = args.next().ok_or_else(usage)?.parse()?;
    rlimit::increase_nofile_limit(count as u64 + 64)?;
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        match std::net::TcpStream::connect_timeout(&address, Duration::from_secs(2)) {
            Ok(stream) => held.push(stream),
            Err(error) => eprintln!("connect: {error}"),
        }
    }
    println!("held {}", held.len());
    std::thread::sleep(until.saturating_duration_since(Instant::now()));
    drop(held);
    Ok(())
}
