//! The server's edges that keys decide: whose name an executor's transition records, the
//! probes at the root, a refused `POST` that keeps its connection, and what `/metrics` counts.

use std::io::{Read, Write};

use aiki_store::prelude::*;
use aiki_store::{RunStatus, Scope, Transition};

use super::{claimed, key, keyed, server};

/// An executor's transition records its own key, whatever actor it names: a leaked executor
/// key cannot put an operator key's name on the timeline.
#[tokio::test]
async fn an_executor_key_cannot_choose_the_actor_of_its_transition() {
    let remote = server().await;
    let operator = key(&remote, &[Scope::Operator]).await;
    let executor = key(&remote, &[Scope::Executor]).await;
    let worker = keyed(&remote, &executor.token);
    let run = claimed(&remote, &worker).await;
    let forged = format!("key:{} ({})", operator.record.id, operator.record.name);
    let moved = worker
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Cancelled, super::NOW).by(Some(forged.clone())),
        )
        .await
        .unwrap();
    assert_eq!(moved.status, RunStatus::Cancelled);
    let timeline = remote.backing().timeline(run.id).await.unwrap();
    let last = timeline.last().and_then(|change| change.actor.clone());
    assert_eq!(
        last,
        Some(format!("key:{} (test)", executor.record.id)),
        "the executor's key is the actor: {timeline:?}"
    );
}

/// Probes find health and readiness at the root, without a key.
#[tokio::test]
async fn health_and_readiness_answer_at_the_root_without_a_key() {
    let remote = server().await;
    for path in ["/health", "/ready"] {
        let response = reqwest::get(format!("{}{path}", remote.url()))
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(body["status"].is_string(), "{path}: {body}");
    }
}

/// Reads one HTTP/1 answer from `stream`: its status (`None` when the connection closed or
/// was reset instead).
fn answer(stream: &mut std::net::TcpStream) -> Option<u16> {
    let mut read = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&read).into_owned();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length = text[..head_end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if read.len() >= head_end + 4 + length {
                return text.get(9..12)?.parse().ok();
            }
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return None,
            Ok(n) => read.extend_from_slice(&buffer[..n]),
        }
    }
}

/// A `POST` refused 401 before its body is read keeps the keep-alive connection: the next
/// request on it is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_refused_before_its_body_keeps_its_connection() {
    let remote = server().await;
    let address = remote.url().trim_start_matches("http://").to_owned();
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let body = format!("{{\"padding\": \"{}\"}}", "x".repeat(100_000));
        for round in 0..5 {
            let post = format!(
                "POST /api/v1/runs HTTP/1.1\r\nhost: {address}\r\ncontent-type: \
                 application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(post.as_bytes()).unwrap();
            assert_eq!(answer(&mut stream), Some(401), "round {round}: the refusal");
            let health = format!("GET /api/v1/health HTTP/1.1\r\nhost: {address}\r\n\r\n");
            stream.write_all(health.as_bytes()).unwrap();
            assert_eq!(
                answer(&mut stream),
                Some(200),
                "round {round}: the connection still answers"
            );
        }
    })
    .await
    .unwrap();
}

/// `/metrics` counts requests by method, route template (never the raw path) and status, and
/// times them.
#[tokio::test]
async fn metrics_count_requests_by_route_template_and_status() {
    let remote = server().await;
    let reader = key(&remote, &[Scope::Read]).await;
    let http = reqwest::Client::new();
    let ids: Vec<aiki_store::RunId> = (0..3).map(|_| aiki_store::RunId::new()).collect();
    for id in &ids {
        let response = http
            .get(format!("{}/api/v1/runs/{id}", remote.url()))
            .bearer_auth(&reader.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 404);
    }
    let text = http
        .get(format!("{}/api/v1/metrics", remote.url()))
        .bearer_auth(&reader.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series =
        "aiki_http_requests_total{method=\"GET\",route=\"/api/v1/runs/{id}\",status=\"404\"}";
    let count = text
        .lines()
        .find_map(|line| line.strip_prefix(series))
        .and_then(|value| value.trim().parse::<f64>().ok());
    assert!(
        count.is_some_and(|count| count >= 3.0),
        "{series} counts the three reads: {text}"
    );
    assert!(
        text.contains("aiki_http_request_seconds_bucket{")
            && text.contains("route=\"/api/v1/runs/{id}\""),
        "latency by route: {text}"
    );
    for id in &ids {
        assert!(!text.contains(&id.to_string()), "no raw path in {text}");
    }
}
