//! What the webhook and metrics ports accept, served by `gangplank::runtime::port::serve` with the
//! bounds `gangplank serve` gives them (shortened where a test would wait for them):
//! - the webhook port speaks HTTP/1.1 only (the API server calls webhooks over it alone);
//! - an AdmissionReview larger than the body limit is refused with 413 before it is read whole;
//! - large reviews are read a few at a time, and one that waits too long for its turn is
//!   answered 503; small ones are read before they wait, so clients trickling their bodies
//!   hold no turn;
//! - the metrics port holds a bounded number of connections;
//! - a connection kept alive and used after the shutdown signal is answered, told to close,
//!   and the port stops once it has closed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use gangplank::connections::Bounds;
use gangplank::runtime::port;
use gangplank::tls::Files;
use gangplank::webhooks::turns::Limits;
use gangplank::webhooks::{self, MAX_BODY_BYTES, Settings, StaticLookup, Webhooks};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

mod recorded;

use recorded::Recorded;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls");

const VALIDATE_QUEUES: &str = "/webhooks/validate/queues";

/// `router` on a free loopback port within `bounds`, as `gangplank serve` serves it.
async fn serve(
    name: &'static str,
    router: Router,
    tls: Option<Files>,
    bounds: Bounds,
) -> (SocketAddr, CancellationToken) {
    gangplank::tls::install_crypto_provider();
    let handle = axum_server::Handle::new();
    let shutdown = CancellationToken::new();
    tokio::spawn(port::serve(
        name,
        "127.0.0.1:0".parse().unwrap(),
        router,
        tls,
        bounds,
        handle.clone(),
        shutdown.clone(),
    ));
    let addr = handle.listening().await.expect("the server listens");
    (addr, shutdown)
}

/// The webhooks over plain HTTP with `limits`.
async fn webhooks(limits: Limits) -> (SocketAddr, CancellationToken) {
    let settings = Settings {
        limits,
        ..Settings::default()
    };
    let router = webhooks::router(Arc::new(Webhooks::new(
        Arc::new(StaticLookup::default()),
        settings,
    )));
    serve("webhooks", router, None, Bounds::WEBHOOKS).await
}

/// The head of a POST of a review of `length` bytes to the Queue webhook.
fn head(length: usize) -> Vec<u8> {
    format!(
        "POST {VALIDATE_QUEUES} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// A request with a body of `length` spaces: whole, it is answered 400 (not an AdmissionReview).
fn whole(length: usize) -> Vec<u8> {
    let mut request = head(length);
    request.resize(request.len() + length, b' ');
    request
}

/// Writes `sent` while reading until the server closes the connection (at most 30 s);
/// returns what it answered. The write half stays open, so a request sent in part stays
/// unfinished.
async fn answer_to(addr: SocketAddr, sent: &[u8]) -> String {
    let (mut from, mut to) = TcpStream::connect(addr).await.unwrap().into_split();
    let sent = sent.to_vec();
    tokio::spawn(async move {
        let _ = to.write_all(&sent).await;
        std::future::pending::<()>().await;
    });
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), from.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection within 30 s")
        .ok();
    String::from_utf8_lossy(&answer).into_owned()
}

/// A connection that sent `sent` and then stalls, held open until dropped.
async fn stalled(addr: SocketAddr, sent: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(sent).await.unwrap();
    stream
}

#[tokio::test]
async fn a_review_larger_than_the_limit_is_refused_with_413_before_it_is_read_whole() {
    let (addr, shutdown) = webhooks(Limits::default()).await;
    let mut request = head(MAX_BODY_BYTES + 1);
    request.extend_from_slice(&[b' '; 1024]);
    let answer = answer_to(addr, &request).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    shutdown.cancel();
}

#[tokio::test]
async fn a_review_at_the_limit_is_read_and_decided() {
    let (addr, shutdown) = webhooks(Limits::default()).await;
    let answer = answer_to(addr, &whole(MAX_BODY_BYTES)).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("failed to decode validate-queues AdmissionReview"),
        "{answer}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn clients_trickling_small_reviews_hold_no_turn() {
    let limits = Limits {
        small: 1,
        large: 1,
        ..Limits::default()
    };
    let (addr, shutdown) = webhooks(limits).await;
    // Eight clients announce small reviews and send a part of them (the body deadline is 10 s).
    let mut slow = Vec::new();
    for _ in 0..8 {
        let mut sent = head(1000);
        sent.extend_from_slice(b"{\"kind\":");
        slow.push(stalled(addr, &sent).await);
    }
    let started = tokio::time::Instant::now();
    let answer = answer_to(addr, &whole(1000)).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered only after {:?}",
        started.elapsed()
    );
    drop(slow);
    shutdown.cancel();
}

#[tokio::test]
async fn a_large_review_waiting_too_long_for_its_turn_is_answered_503() {
    let limits = Limits {
        large: 1,
        wait: Duration::from_millis(300),
        ..Limits::default()
    };
    let metrics = Recorded::start();
    let (addr, shutdown) = webhooks(limits).await;
    // A client takes the one large turn and trickles nothing more (the body deadline is 10 s).
    let mut sent = head(1024 * 1024);
    sent.extend_from_slice(b"{\"kind\":");
    let holder = stalled(addr, &sent).await;
    metrics
        .reaches(r#"gangplank_webhook_turns_taken{lane="large"}"#, 1)
        .await;
    let answer = answer_to(addr, &whole(100 * 1024)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains(
            "failed to answer validate-queues AdmissionReview: it waited 300ms for its turn"
        ),
        "{answer}"
    );
    // A small review does not wait for the large lane.
    let answer = answer_to(addr, &whole(1000)).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    drop(holder);
    shutdown.cancel();
}

#[tokio::test]
async fn the_webhook_port_offers_http_1_1_alone() {
    let files = Files {
        cert: PathBuf::from(format!("{FIXTURES}/server.crt")),
        key: PathBuf::from(format!("{FIXTURES}/server.key")),
        client_ca: None,
        client_name: None,
    };
    let router = webhooks::router(Arc::new(Webhooks::new(
        Arc::new(StaticLookup::default()),
        Settings::default(),
    )));
    let (addr, shutdown) = serve("webhooks", router, Some(files), Bounds::WEBHOOKS).await;
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(format!("{FIXTURES}/ca.crt")).unwrap())
        .unwrap();
    let mut config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    shutdown.cancel();
}

#[tokio::test]
async fn a_probe_of_the_metrics_port_is_answered_while_silent_connections_hold_every_place() {
    let router = Router::new().route("/livez", axum::routing::get(|| async { "ok" }));
    let (addr, shutdown) = serve("metrics", router, None, Bounds::METRICS).await;
    // Clients of another address that say nothing take every place (the idle deadline is
    // 30 s); the probe's address holds none, so it takes one of theirs.
    let mut open = Vec::new();
    for _ in 0..Bounds::METRICS.connections + 8 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from(([127, 0, 0, 2], 0))).unwrap();
        open.push(socket.connect(addr).await.unwrap());
    }
    let answer = answer_to(
        addr,
        b"GET /livez HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(open);
    shutdown.cancel();
}

/// Sends a keep-alive review of `length` spaces on `stream` and reads the answer's head and
/// body, leaving the connection as the server leaves it.
async fn kept_alive_answer(stream: &mut TcpStream, length: usize) -> String {
    let mut request = format!(
        "POST {VALIDATE_QUEUES} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    )
    .into_bytes();
    request.resize(request.len() + length, b' ');
    stream.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        let read = stream.read(&mut byte).await.unwrap();
        assert_eq!(
            read, 1,
            "the connection closed before an answer: {answer:?}"
        );
        answer.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&answer).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length: "))
        .expect("an answer with a content-length")
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    head + &String::from_utf8_lossy(&body)
}

#[tokio::test]
async fn a_kept_alive_connection_used_after_the_shutdown_signal_is_answered_and_told_to_close() {
    let router = webhooks::router(Arc::new(Webhooks::new(
        Arc::new(StaticLookup::default()),
        Settings::default(),
    )));
    let handle = axum_server::Handle::new();
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(port::serve(
        "webhooks",
        "127.0.0.1:0".parse().unwrap(),
        router,
        None,
        Bounds::WEBHOOKS,
        handle.clone(),
        shutdown.clone(),
    ));
    let addr = handle.listening().await.expect("the server listens");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let before = kept_alive_answer(&mut stream, 4).await;
    assert!(before.starts_with("http/1.1 400"), "{before}");
    assert!(!before.contains("connection: close"), "{before}");

    shutdown.cancel();
    let after = kept_alive_answer(&mut stream, 4).await;
    assert!(after.starts_with("http/1.1 400"), "{after}");
    assert!(after.contains("connection: close"), "{after}");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest));
    assert_eq!(closed.await.expect("closed within 10 s").unwrap(), 0);
    tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the port stops within 10 s of its last connection closing")
        .unwrap()
        .unwrap();
}
