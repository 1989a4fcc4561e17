//! An aiki server process for the remote worker tests, as `aiki server` runs one: serves the
//! store named by `AIKI_SERVER_STORE_URL` on `AIKI_SERVER_LISTEN` (default `127.0.0.1:0`) with
//! API keys checked, and runs the daemons and the push dispatcher. Prints `listening on http://ADDRESS` once it
//! serves; the tests `kill -9` it and start another on the same address.

use std::time::Duration;

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(serve())
}

async fn serve() -> anyhow::Result<()> {
    aiki_tests::log_from_env();
    let url = std::env::var("AIKI_SERVER_STORE_URL")
        .map_err(|_| anyhow::anyhow!("set AIKI_SERVER_STORE_URL"))?;
    let listen = std::env::var("AIKI_SERVER_LISTEN").unwrap_or_else(|_| "127.0.0.1:0".to_owned());
    let store = aiki::store::connect(&url).await?;
    // The address of a server just killed may take a moment to be free again.
    let listener = loop {
        match tokio::net::TcpListener::bind(&listen).await {
            Ok(listener) => break listener,
            Err(error) => {
                eprintln!("cannot listen on {listen} yet ({error}); retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let daemons = aiki::Worker::builder(store.clone())
        .worker_id(format!("test-server-{}", std::process::id()))
        .build()?
        .start();
    let address = listener.local_addr()?;
    let _dispatcher = aiki_server::dispatch::Dispatcher::new(
        store.clone(),
        format!("test-server-{}-{address}", std::process::id()),
    )
    .start();
    println!("listening on http://{address}");
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    aiki_server::serve(
        listener,
        store,
        aiki_server::ServerConfig::default(),
        async move {
            terminate.recv().await;
        },
    )
    .await?;
    daemons.shutdown().await;
    Ok(())
}
