//! `aiki server --no-daemons` still pushes: the daemons may run elsewhere, but no other process
//! delivers the runs of a version served by a push endpoint.

use std::time::Duration;

use aiki::store::{Namespace, NewRun};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::server::{Server, create_key};
use crate::support::aiki;

async fn a_server_without_daemons_pushes(backend: aiki_tests::Backend) {
    let url = backend.fresh_url().await;
    assert_eq!(aiki(&url, &["migrate"]).code, 0);
    // The endpoint: a listener that reads what is posted to it.
    let endpoint = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint_url = format!("http://{}/aiki", endpoint.local_addr().unwrap());
    let set = aiki(&url, &["endpoints", "set", "pushed@1", &endpoint_url]);
    assert_eq!(set.code, 0, "{}", set.stderr);
    create_key(&url, "executor,operator");
    let _server = Server::start_with(&url, "127.0.0.1:0", &["--no-daemons"]);
    let store = aiki::store::connect(&url).await.unwrap();
    let namespace = Namespace::new("pushed", "1");
    let input = serde_json::json!(1);
    let hash = aiki::input_hash(&1).unwrap();
    let run = NewRun::new(namespace, input, hash, aiki::Clock::now(&aiki::SystemClock));
    let id = run.id;
    store.create_run(run).await.unwrap();
    let delivered = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let (mut connection, _) = endpoint.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            while let Ok(Ok(read)) =
                tokio::time::timeout(Duration::from_millis(500), connection.read(&mut buffer)).await
            {
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..read]);
                if String::from_utf8_lossy(&request).contains(&id.to_string()) {
                    let _ = connection
                        .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
                        .await;
                    return String::from_utf8_lossy(&request).into_owned();
                }
            }
        }
    })
    .await
    .expect("the run was pushed to its endpoint within 30 s");
    assert!(delivered.starts_with("POST /aiki"), "{delivered}");
    assert!(delivered.contains("x-aiki-signature"), "{delivered}");
}

aiki_tests::on_sql_backends!(a_server_without_daemons_pushes,);
