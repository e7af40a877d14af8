//! What the extender port accepts, served by `gangplank::runtime::port::serve`, the function
//! `gangplank serve` uses:
//! - with `--extender-client-ca-file`, only a client holding a certificate that CA signed for
//!   the scheduler's name (`--extender-client-name`) gets an answer; anyone else is refused
//!   during the TLS handshake, before any verb runs;
//! - connections that would otherwise be held are closed: silence during the TLS handshake,
//!   headers (HTTP/1 or HTTP/2) or a body trickled past their deadline (short bounds here);
//!   a connection takes a place among the open ones only once its handshake is done; and
//!   bodies larger than a scheduler sends are refused before they are read whole;
//! - every connection closed for those reasons is counted by reason.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gangplank::cache::Cache;
use gangplank::connections::Bounds;
use gangplank::extender::{self, BindRequest, Binder, Extender, MAX_BODY_BYTES};
use gangplank::runtime::port;
use gangplank::tls::Files;
use gangplank_core::claims::Settings;
use gangplank_core::policy::placement::Strategy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

mod recorded;

use recorded::Recorded;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls");

const SHORT: Bounds = Bounds {
    handshake: Duration::from_millis(300),
    idle: Duration::from_millis(300),
    body: Duration::from_millis(300),
    connections: 16,
    handshakes: 16,
    http2: true,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!("{FIXTURES}/{name}"))
}

struct NeverBinds;

impl Binder for NeverBinds {
    fn bind<'a>(
        &'a self,
        _: &'a BindRequest,
    ) -> futures::future::BoxFuture<'a, Result<(), extender::Error>> {
        panic!("no test here gets as far as a Binding")
    }
}

/// An extender with an empty cache on a free loopback port, over TLS from `tls` if given.
async fn extender(tls: Option<Files>, bounds: Bounds) -> (SocketAddr, CancellationToken) {
    let settings = Settings {
        strategy: Strategy::Binpack,
        max_hold: Duration::from_secs(60),
        bind_unmarked: false,
        hold_scheduler_gangs: false,
        gated_admission: false,
    };
    let extender = Extender::new(Cache::new().0, Arc::new(NeverBinds), settings);
    serve(extender, tls, bounds).await
}

/// `extender` on a free loopback port, as `gangplank serve` serves it.
async fn serve(
    extender: Extender,
    tls: Option<Files>,
    bounds: Bounds,
) -> (SocketAddr, CancellationToken) {
    gangplank::tls::install_crypto_provider();
    let handle = axum_server::Handle::new();
    let shutdown = CancellationToken::new();
    tokio::spawn(port::serve(
        "extender",
        "127.0.0.1:0".parse().unwrap(),
        extender::router(Arc::new(extender)),
        tls,
        bounds,
        handle.clone(),
        shutdown.clone(),
    ));
    let addr = handle.listening().await.expect("the extender listens");
    (addr, shutdown)
}

/// The fixtures' serving certificate, demanding client certificates from the fixtures' CA
/// for the scheduler's name when `clients`.
fn tls(clients: bool) -> Option<Files> {
    Some(Files {
        cert: fixture("server.crt"),
        key: fixture("server.key"),
        client_ca: clients.then(|| fixture("ca.crt")),
        client_name: clients.then(|| "system:kube-scheduler".to_owned()),
    })
}

/// The same, demanding client certificates from the CA that signed `replica.crt`, a
/// certificate like the one a chart's `genSignedCert` makes for Gangplank's own Service (for
/// server and client authentication), for the name `client_name`.
fn tls_of_replica_ca(client_name: &str) -> Option<Files> {
    Some(Files {
        client_ca: Some(fixture("replica-ca.crt")),
        client_name: Some(client_name.to_owned()),
        ..tls(false).unwrap()
    })
}

// ---- client certificates

/// POSTs a bind of a pod nobody knows over TLS, presenting `identity` (certificate and key
/// fixture names) if any; returns the HTTP answer, or the error that ended the exchange.
async fn bind_over_tls(addr: SocketAddr, identity: Option<(&str, &str)>) -> Result<String, String> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(fixture("ca.crt")).unwrap())
        .unwrap();
    let builder = ClientConfig::builder().with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_file(fixture(cert)).unwrap()],
                PrivateKeyDer::from_pem_file(fixture(key)).unwrap(),
            )
            .unwrap(),
    };
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let exchange = async {
        let mut tls = TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await?;
        let body = r#"{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n1"}"#;
        tls.write_all(
            format!(
                "POST /scheduler/bind HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await?;
        let mut answer = String::new();
        tls.read_to_string(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .expect("the exchange ends within 30 s")
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_certificate_the_ca_signed_for_another_name_is_refused_before_any_verb_runs_and_counted()
{
    let metrics = Recorded::start();
    let (addr, shutdown) =
        extender(tls_of_replica_ca("system:kube-scheduler"), Bounds::EXTENDER).await;
    let err = bind_over_tls(addr, Some(("replica.crt", "replica.key")))
        .await
        .unwrap_err();
    assert!(
        err.contains("received fatal alert: CertificateUnknown"),
        "{err}"
    );
    assert_eq!(metrics.closed("wrong_client"), 1);
    assert_eq!(metrics.closed("handshake_failed"), 0);
    shutdown.cancel();
}

#[tokio::test]
async fn the_same_certificate_is_accepted_when_its_name_is_the_allowed_one() {
    let (addr, shutdown) = extender(
        tls_of_replica_ca("gangplank.gangplank-system.svc"),
        Bounds::EXTENDER,
    )
    .await;
    let answer = bind_over_tls(addr, Some(("replica.crt", "replica.key")))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    shutdown.cancel();
}

#[tokio::test]
async fn the_schedulers_certificate_gets_an_answer() {
    let (addr, shutdown) = extender(tls(true), Bounds::EXTENDER).await;
    let answer = bind_over_tls(addr, Some(("client.crt", "client.key")))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(
        answer.contains("pod ns/p is not in Gangplank's cache yet"),
        "{answer}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused_before_any_verb_runs_and_counted() {
    let metrics = Recorded::start();
    let (addr, shutdown) = extender(tls(true), Bounds::EXTENDER).await;
    let err = bind_over_tls(addr, None).await.unwrap_err();
    assert!(err.contains("CertificateRequired"), "{err}");
    assert_eq!(metrics.closed("handshake_failed"), 1);
    shutdown.cancel();
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused_before_any_verb_runs() {
    let (addr, shutdown) = extender(tls(true), Bounds::EXTENDER).await;
    let err = bind_over_tls(addr, Some(("stranger.crt", "stranger.key")))
        .await
        .unwrap_err();
    assert!(
        err.contains("received fatal alert: CertificateUnknown"),
        "{err}"
    );
    shutdown.cancel();
}

// ---- held binds belong to their caller

#[tokio::test]
async fn a_held_bind_whose_connection_closes_is_no_longer_held() {
    use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, Resources};
    let (cache, mut mirror) = Cache::new();
    mirror.apply_node(Node {
        name: "n1".into(),
        allocatable: Resources::from([("cpu", 8_000), ("pods", 110)]),
        ..Node::default()
    });
    mirror.apply_pod_group(PodGroup::new(GroupKey::new("ns", "g"), 2, "default"));
    for i in 0..2 {
        mirror.apply_pod(Pod {
            uid: format!("u{i}"),
            namespace: "ns".into(),
            name: format!("g-{i}"),
            pod_group: Some("g".into()),
            requests: Resources::from([("cpu", 1_000), ("pods", 1)]),
            marked: true,
            ..Pod::default()
        });
    }
    let settings = Settings {
        strategy: Strategy::Binpack,
        max_hold: Duration::from_secs(60),
        bind_unmarked: false,
        hold_scheduler_gangs: false,
        gated_admission: false,
    };
    let extender = Extender::new(cache, Arc::new(NeverBinds), settings);
    let permits = extender.permits();
    let (addr, shutdown) = serve(extender, None, Bounds::EXTENDER).await;

    let body = r#"{"PodName":"g-0","PodNamespace":"ns","PodUID":"u0","Node":"n1"}"#;
    let mut scheduler = TcpStream::connect(addr).await.unwrap();
    scheduler
        .write_all(
            format!(
                "POST /scheduler/bind HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while permits.held() != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bind was never held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The scheduler goes away while its bind is held.
    drop(scheduler);
    while permits.held() != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bind is still held after its connection closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
}

// ---- bounds and sizes

/// Writes `sent` while reading until the server closes the connection (at most 30 s);
/// returns what it answered. The server may stop reading early (a refused body).
async fn answer_to(addr: SocketAddr, sent: &[u8]) -> String {
    let (mut from, mut to) = TcpStream::connect(addr).await.unwrap().into_split();
    let sent = sent.to_vec();
    tokio::spawn(async move {
        let _ = to.write_all(&sent).await;
        // Keep the write half open: closing it would end the request early.
        std::future::pending::<()>().await;
    });
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), from.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection within 30 s")
        .ok();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_client_that_stops_in_the_middle_of_its_headers_is_cut_off_and_counted() {
    let metrics = Recorded::start();
    let (addr, shutdown) = extender(None, SHORT).await;
    let answer = answer_to(addr, b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\n").await;
    assert!(!answer.contains("200 OK"), "{answer}");
    assert_eq!(metrics.closed("server_mid_request"), 1);
    shutdown.cancel();
}

#[tokio::test]
async fn a_client_that_never_sends_the_body_it_announced_is_answered_and_cut_off() {
    let (addr, shutdown) = extender(None, SHORT).await;
    let answer = answer_to(
        addr,
        b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"Pod\":",
    )
    .await;
    assert!(
        answer.contains("the request body did not arrive within 300ms"),
        "{answer}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_client_that_trickles_its_body_is_cut_off_at_the_body_deadline() {
    let (addr, shutdown) = extender(None, SHORT).await;
    let (mut from, mut to) = TcpStream::connect(addr).await.unwrap().into_split();
    to.write_all(b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n")
        .await
        .unwrap();
    // A byte every 50 ms: never silent for the 300 ms deadline, but done only after 50 s.
    let trickle = tokio::spawn(async move {
        for _ in 0..1000 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if to.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), from.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes within 30 s")
        .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.contains("the request body did not arrive within 300ms"),
        "{answer}"
    );
    trickle.abort();
    shutdown.cancel();
}

#[tokio::test]
async fn an_http2_client_that_sends_no_request_is_cut_off_and_counted() {
    let metrics = Recorded::start();
    let (addr, shutdown) = extender(None, SHORT).await;
    // The HTTP/2 preface and an empty SETTINGS frame, then nothing.
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let answer = answer_to(addr, &preface).await;
    assert!(!answer.is_empty(), "the server speaks HTTP/2: {answer:?}");
    assert_eq!(
        metrics.closed("server_between_requests") + metrics.closed("server_mid_request"),
        1
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_connection_in_its_tls_handshake_holds_no_place_among_the_open_ones() {
    let bounds = Bounds {
        connections: 1,
        handshakes: 4,
        ..Bounds::EXTENDER
    };
    let (addr, shutdown) = extender(tls(true), bounds).await;
    // Two clients that never say hello (the handshake deadline is 10 s).
    let silent = [
        TcpStream::connect(addr).await.unwrap(),
        TcpStream::connect(addr).await.unwrap(),
    ];
    let answer = bind_over_tls(addr, Some(("client.crt", "client.key")))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    drop(silent);
    shutdown.cancel();
}

/// A TCP connection to `addr` from the loopback address `127.0.0.<last>`.
async fn connect_from(last: u8, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from(([127, 0, 0, last], 0)))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

/// The first bytes of a TLS ClientHello (a record header announcing 512 bytes, and the
/// handshake header), as a client that stops mid-hello sends them.
const HELLO_CUT_SHORT: [u8; 9] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc];

/// Whether the server has closed `stream` (it reads the end, or an error), as known now.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.try_read(&mut byte) {
        Ok(0) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        Ok(_) => false,
    }
}

/// Fills every one of `places` handshake places with connections of another address that
/// send `first` and stop, then binds as the scheduler: its answer must come, one of them
/// having given its place up. Returns the metrics recorded.
async fn the_scheduler_binds_past(places: usize, first: &[u8]) -> Recorded {
    let metrics = Recorded::start();
    let bounds = Bounds {
        handshakes: places,
        ..Bounds::EXTENDER
    };
    let (addr, shutdown) = extender(tls(true), bounds).await;
    let mut flood = Vec::new();
    for _ in 0..places {
        let mut stream = connect_from(2, addr).await;
        stream.write_all(first).await.unwrap();
        flood.push(stream);
    }
    metrics
        .reaches(
            r#"gangplank_server_handshakes{server="extender"}"#,
            places as u64,
        )
        .await;
    let answer = bind_over_tls(addr, Some(("client.crt", "client.key")))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert_eq!(metrics.closed("shed_in_handshake"), 1);
    metrics
        .reaches(
            r#"gangplank_server_connections_held_unread{server="extender"}"#,
            1,
        )
        .await;
    shutdown.cancel();
    metrics
}

#[tokio::test]
async fn the_scheduler_gets_its_answer_while_silent_connections_hold_every_handshake_place() {
    the_scheduler_binds_past(2, b"").await;
}

#[tokio::test]
async fn the_scheduler_gets_its_answer_while_hellos_cut_short_hold_every_handshake_place() {
    let metrics = the_scheduler_binds_past(3, &HELLO_CUT_SHORT).await;
    assert_eq!(metrics.closed("handshake_failed"), 0);
}

#[tokio::test]
async fn a_flood_from_as_many_addresses_as_places_sheds_its_own_oldest_and_the_scheduler_gets_in() {
    let metrics = Recorded::start();
    let places = 4;
    let bounds = Bounds {
        handshakes: places,
        ..Bounds::EXTENDER
    };
    let (addr, shutdown) = extender(tls(true), bounds).await;
    let handshakes = r#"gangplank_server_handshakes{server="extender"}"#;
    let shed = r#"gangplank_server_connections_closed_total{server="extender",reason="shed_in_handshake"}"#;
    let mut flood = Vec::new();
    for address in 2..2 + places as u8 {
        flood.push(connect_from(address, addr).await);
    }
    metrics.reaches(handshakes, places as u64).await;
    for address in 10..10 + places as u8 {
        flood.push(connect_from(address, addr).await);
    }
    metrics.reaches(shed, places as u64).await;
    assert_eq!(
        metrics.value(r#"gangplank_server_connections_refused_total{server="extender"}"#),
        0,
        "no newcomer of the flood is refused: each takes the place of its oldest"
    );
    // One of the scheduler's connections stops mid-hello: its address holds a place, as many
    // as any of the flood's, and its next connection still gets in.
    let mut stalled = connect_from(1, addr).await;
    stalled.write_all(&HELLO_CUT_SHORT).await.unwrap();
    metrics.reaches(shed, places as u64 + 1).await;
    let answer = bind_over_tls(addr, Some(("client.crt", "client.key")))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(
        !closed_by_server(&mut stalled),
        "the flood's silent connections went first; the one mid-hello kept its place"
    );
    metrics
        .reaches(
            r#"gangplank_server_connections_held_unread{server="extender"}"#,
            places as u64 + 2,
        )
        .await;
    shutdown.cancel();
}

#[tokio::test]
async fn a_client_silent_during_the_tls_handshake_is_cut_off_and_counted() {
    let metrics = Recorded::start();
    let (addr, shutdown) = extender(tls(false), SHORT).await;
    let answer = answer_to(addr, b"").await;
    assert_eq!(
        answer, "",
        "nothing is answered to a client that never said hello"
    );
    assert_eq!(metrics.closed("handshake_timeout"), 1);
    shutdown.cancel();
}

#[tokio::test]
async fn a_connection_idle_after_its_answer_is_closed_by_the_idle_deadline_and_counted() {
    let metrics = Recorded::start();
    let (addr, shutdown) = extender(None, SHORT).await;
    let answer = answer_to(
        addr,
        b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(metrics.closed("server_between_requests"), 1);
    assert_eq!(metrics.closed("server_mid_request"), 0);
    shutdown.cancel();
}

/// A filter request, HTTP/1.1, whose request line and headers come to `bytes` in all (a padding
/// header makes up the size), with a small body; it asks to close the connection after the
/// answer.
fn filter_with_headers_of(bytes: usize) -> Vec<u8> {
    let head = |padding: &str| {
        format!(
            "POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\nx-padding: {padding}\r\n\r\n"
        )
    };
    let padding = "a".repeat(bytes - head("").len());
    let request = head(&padding) + "{}";
    assert_eq!(request.len(), bytes + 2);
    request.into_bytes()
}

#[tokio::test]
async fn headers_over_16_kib_are_refused_with_431_and_headers_under_it_are_answered() {
    assert_eq!(port::MAX_HEADER_BYTES, 16 * 1024);
    let (addr, shutdown) = extender(None, SHORT).await;
    let over = answer_to(addr, &filter_with_headers_of(port::MAX_HEADER_BYTES + 1)).await;
    assert!(over.starts_with("HTTP/1.1 431"), "{over}");
    // A kibibyte under the limit leaves room for what the server reads past the headers.
    let under = answer_to(addr, &filter_with_headers_of(port::MAX_HEADER_BYTES - 1024)).await;
    assert!(under.starts_with("HTTP/1.1 "), "{under}");
    assert!(!under.starts_with("HTTP/1.1 431"), "{under}");
    shutdown.cancel();
}

#[tokio::test]
async fn a_body_larger_than_a_scheduler_sends_is_refused_with_413() {
    // The size is what is tested: the body's deadline is long enough for 16 MiB on a busy
    // machine.
    let bounds = Bounds {
        body: Duration::from_secs(30),
        ..SHORT
    };
    let (addr, shutdown) = extender(None, bounds).await;
    let mut request = format!(
        "POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        MAX_BODY_BYTES + 1
    )
    .into_bytes();
    request.resize(request.len() + MAX_BODY_BYTES + 1, b' ');
    let answer = answer_to(addr, &request).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    shutdown.cancel();
}

#[tokio::test]
async fn a_request_gets_its_answer_while_silent_open_connections_hold_every_place() {
    let metrics = Recorded::start();
    let bounds = Bounds {
        connections: 4,
        ..Bounds::EXTENDER
    };
    let (addr, shutdown) = extender(None, bounds).await;
    // Four clients of another address that say nothing (the idle deadline is 30 s) take
    // every place.
    let mut open = Vec::new();
    for _ in 0..bounds.connections {
        open.push(connect_from(2, addr).await);
    }
    metrics
        .reaches(r#"gangplank_server_connections{server="extender"}"#, 4)
        .await;
    let answer = answer_to(
        addr,
        b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 400"),
        "a fifth is answered: {answer}"
    );
    assert_eq!(metrics.closed("shed_open"), 1);
    shutdown.cancel();
}
