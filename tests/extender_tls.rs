//! The extender port with `--extender-client-ca-file`: only a client holding a certificate that
//! CA signed gets an answer; anyone else is refused during the TLS handshake, before any verb
//! runs. Served by `gangplank::server::serve`, the function `gangplank serve` uses.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gangplank::cache::Cache;
use gangplank::extender::{self, BindRequest, Binder, Extender};
use gangplank::gang::claims::Settings;
use gangplank::policy::placement::Strategy;
use gangplank::server;
use gangplank::tls::Files;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls");

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

/// An extender with an empty cache on a free loopback port, demanding client certificates
/// signed by the fixtures' CA.
async fn extender_demanding_client_certificates() -> (SocketAddr, CancellationToken) {
    gangplank::tls::install_crypto_provider();
    let settings = Settings {
        strategy: Strategy::Binpack,
        max_hold: Duration::from_secs(60),
        bind_unmarked: false,
    };
    let router = extender::router(Arc::new(Extender::new(
        Cache::new(),
        Arc::new(NeverBinds),
        settings,
    )));
    let files = Files {
        cert: fixture("server.crt"),
        key: fixture("server.key"),
        client_ca: Some(fixture("ca.crt")),
    };
    let handle = axum_server::Handle::new();
    let shutdown = CancellationToken::new();
    tokio::spawn(server::serve(
        "extender",
        "127.0.0.1:0".parse().unwrap(),
        router,
        Some(files),
        handle.clone(),
        shutdown.clone(),
    ));
    let addr = handle.listening().await.expect("the extender listens");
    (addr, shutdown)
}

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
async fn the_schedulers_certificate_gets_an_answer() {
    let (addr, shutdown) = extender_demanding_client_certificates().await;
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
async fn a_client_without_a_certificate_is_refused_before_any_verb_runs() {
    let (addr, shutdown) = extender_demanding_client_certificates().await;
    let err = bind_over_tls(addr, None).await.unwrap_err();
    assert!(err.contains("CertificateRequired"), "{err}");
    shutdown.cancel();
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused_before_any_verb_runs() {
    let (addr, shutdown) = extender_demanding_client_certificates().await;
    let err = bind_over_tls(addr, Some(("stranger.crt", "stranger.key")))
        .await
        .unwrap_err();
    assert!(
        err.contains("received fatal alert: CertificateUnknown"),
        "{err}"
    );
    shutdown.cancel();
}
