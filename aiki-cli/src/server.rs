//! `aiki server`: the store over HTTP, the daemons under the store's leader lease, and the push
//! dispatcher under its own.

use std::io::Write;

use aiki::Worker;
use aiki_server::ServerConfig;

use crate::Failure;
use crate::args::{Cli, ServerArgs};

pub(crate) async fn serve(
    cli: &Cli,
    args: &ServerArgs,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let url = cli.url()?;
    if url.starts_with("http://") || url.starts_with("https://") {
        return Err(Failure::error(
            "`aiki server` serves a database (`--url sqlite://…` or `postgres://…`), not another \
             server",
        ));
    }
    // A server migrates the schema as a worker does.
    let store = aiki::store::connect(url).await?;
    let mut config = ServerConfig::default()
        .shutdown_grace(args.shutdown_grace)
        .max_connections(args.max_connections.get())
        .header_read_timeout(std::time::Duration::from_secs(
            args.header_read_timeout.get(),
        ));
    if let Some(per_second) = args.rate_limit {
        config = config.rate_limit(per_second, per_second.saturating_mul(2.try_into()?));
    }
    if args.insecure_no_auth {
        config = config.insecure_no_auth();
    } else if !store
        .keys()
        .await?
        .iter()
        .any(|key| key.revoked_at.is_none())
    {
        return Err(Failure::error(
            "the store holds no API key, so no one could call this server: create one with \
             `aiki keys create --name NAME --scope executor,operator` (or serve without keys, \
             where no one else can reach the address, with `--insecure-no-auth`)",
        ));
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|error| Failure::error(format!("cannot listen on {}: {error}", args.listen)))?;
    let address = listener.local_addr()?;
    // The daemons: a worker that serves no workflow claims nothing, and contends for the lease.
    let daemons = if args.no_daemons {
        None
    } else {
        let id = format!("aiki-server-{}-{address}", std::process::id());
        Some(
            Worker::builder(store.clone())
                .worker_id(id)
                .build()?
                .start(),
        )
    };
    // Push deliveries to the endpoints configured in the store (`aiki endpoints`), by the
    // holder of the dispatch lease: on every server, `--no-daemons` or not, since no other
    // process delivers pushes (the lease keeps it to one at a time).
    let _dispatcher = {
        // Unique even for servers alike in pid and address (containers).
        let random = uuid::Uuid::new_v4().simple().to_string();
        let holder = format!(
            "aiki-server-{}-{address}-{}",
            std::process::id(),
            &random[..8]
        );
        aiki_server::dispatch::Dispatcher::new(store.clone(), holder).start()
    };
    #[cfg(feature = "redis")]
    let _publisher = match &args.redis_url {
        Some(redis) => Some(
            aiki::redis::RedisPublisher::new(redis, store.clone())
                .map_err(|error| Failure::error(format!("--redis-url: {error}")))?
                .start(),
        ),
        None => None,
    };
    writeln!(out, "aiki server listening on http://{address}")?;
    out.flush()?;
    aiki_server::serve(listener, store, config, stopped()).await?;
    if let Some(daemons) = daemons {
        daemons.shutdown().await;
    }
    Ok(0)
}

/// Completes on Ctrl-C or SIGTERM.
async fn stopped() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
