//! TLS for the extender and webhook ports: certificate rotation, and client certificates on
//! the extender port.
//!
//! cert-manager (or the projected Secret behind it) rewrites the certificate files in place
//! before they expire. Rather than restarting, Gangplank polls the files' modification times
//! and, when any changed, loads them again and swaps the result into the running server: new
//! connections get the new certificate, open ones finish with the old. Files that fail to
//! load (for example, the key written but not yet the certificate) keep the old configuration
//! serving and are retried at the next poll.
//!
//! With a client CA ([`Files::client_ca`]), a connection must present a certificate that CA
//! signed for client authentication, or the handshake fails. With a client name too
//! ([`Files::client_name`]), that certificate's subject common name (the user name Kubernetes
//! reads from a client certificate) must be that name, or the handshake fails with
//! [`WrongClient`]: the CA may sign other certificates for client authentication (a Helm
//! chart's `genSignedCert` gives Gangplank's own serving certificate that usage), and only the
//! scheduler's may reach the extender's verbs (bind above all).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum_server::tls_rustls::RustlsConfig;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, OtherError, RootCertStore,
    SignatureScheme,
};
use tokio_util::sync::CancellationToken;

/// How often the certificate files are checked for changes.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to load TLS certificate {cert} and key {key}: {why}")]
    Load {
        cert: PathBuf,
        key: PathBuf,
        why: String,
    },
    #[error("failed to load client CA {path}: {why}")]
    ClientCa { path: PathBuf, why: String },
}

/// The files one TLS port serves from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
    /// PEM CA bundle: when set, clients must present a certificate it signed.
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: the common name the client certificate's subject must have.
    pub client_name: Option<String>,
}

impl Files {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }
}

/// Installs ring as the process-wide rustls crypto provider, once. The crate is built without
/// a default provider so the choice is explicit.
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Loads the files into a server configuration (HTTP/1.1 offered by ALPN, and HTTP/2 before
/// it when `http2`).
pub async fn load(files: &Files, http2: bool) -> Result<RustlsConfig, Error> {
    Ok(RustlsConfig::from_config(Arc::new(server_config(
        files, http2,
    )?)))
}

fn server_config(files: &Files, http2: bool) -> Result<ServerConfig, Error> {
    install_crypto_provider();
    let load_error = |why: String| Error::Load {
        cert: files.cert.clone(),
        key: files.key.clone(),
        why,
    };
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| load_error(e.to_string()))?;
    if chain.is_empty() {
        return Err(load_error(format!(
            "{} holds no PEM certificate",
            files.cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| load_error(e.to_string()))?;
    let builder = ServerConfig::builder();
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let verifier = client_verifier(path)?;
            match &files.client_name {
                None => builder.with_client_cert_verifier(verifier),
                Some(name) => builder.with_client_cert_verifier(Arc::new(SubjectVerifier {
                    inner: verifier,
                    name: name.clone(),
                })),
            }
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| load_error(e.to_string()))?;
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

fn client_verifier(path: &Path) -> Result<Arc<dyn ClientCertVerifier>, Error> {
    let error = |why: String| Error::ClientCa {
        path: path.to_owned(),
        why,
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| error(e.to_string()))? {
        roots
            .add(cert.map_err(|e| error(e.to_string()))?)
            .map_err(|e| error(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(error("it holds no PEM certificate".into()));
    }
    WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .map_err(|e| error(e.to_string()))
}

/// A client certificate the client CA signed, but for another subject than the one allowed.
#[derive(Debug, thiserror::Error)]
#[error(
    "refused a client certificate for {seen}: only {wanted:?} may call (--extender-client-name)"
)]
pub struct WrongClient {
    /// The certificate's subject common names, or "no common name".
    pub seen: String,
    pub wanted: String,
}

/// A client verifier that also demands the certificate's subject common name be `name`.
#[derive(Debug)]
struct SubjectVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    name: String,
}

impl ClientCertVerifier for SubjectVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let names = webpki::EndEntityCert::try_from(end_entity)
            .map(|cert| common_names(cert.subject()))
            .unwrap_or_default();
        if names.contains(&self.name) {
            return Ok(verified);
        }
        let refused = WrongClient {
            seen: if names.is_empty() {
                "no common name".to_owned()
            } else {
                format!("CN={}", names.join(", CN="))
            },
            wanted: self.name.clone(),
        };
        tracing::warn!(error = %refused, "refused a TLS client");
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(
            OtherError(Arc::new(refused)),
        )))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The common names (OID 2.5.4.3) of a DER subject given without its outer SEQUENCE, as
/// webpki gives it; nothing for a subject that does not parse.
fn common_names(subject: &[u8]) -> Vec<String> {
    const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
    let mut names = Vec::new();
    let mut rdns = subject;
    while let Some((0x31, set, rest)) = der(rdns) {
        rdns = rest;
        let mut attributes = set;
        while let Some((0x30, attribute, rest)) = der(attributes) {
            attributes = rest;
            let Some((0x06, oid, value)) = der(attribute) else {
                continue;
            };
            // UTF8String, PrintableString, IA5String.
            if let Some((0x0c | 0x13 | 0x16, text, _)) = der(value)
                && oid == COMMON_NAME
                && let Ok(text) = std::str::from_utf8(text)
            {
                names.push(text.to_owned());
            }
        }
    }
    names
}

/// One DER element: its tag, its contents and what follows it.
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, input) = input.split_first()?;
    let (&first, mut input) = input.split_first()?;
    let length = if first < 0x80 {
        usize::from(first)
    } else {
        let octets = usize::from(first & 0x7f);
        if octets == 0 || octets > 4 || input.len() < octets {
            return None;
        }
        let (bytes, rest) = input.split_at(octets);
        input = rest;
        bytes.iter().fold(0, |n, &b| (n << 8) | usize::from(b))
    };
    (input.len() >= length).then(|| (tag, &input[..length], &input[length..]))
}

/// Modification times of the files; `None` for a file that cannot be read.
type Stamps = Vec<Option<SystemTime>>;

fn stamps(files: &Files) -> Stamps {
    files
        .paths()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

/// Reloads `config` from the files whenever their modification time changes, until shutdown.
pub async fn reload_on_change(
    config: RustlsConfig,
    files: Files,
    http2: bool,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let mut loaded = stamps(&files);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match reload_if_changed(&config, &files, http2, &mut loaded) {
            Ok(true) => tracing::info!(cert = %files.cert.display(), "reloaded TLS certificate"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "keeping the previous TLS certificate"),
        }
    }
}

/// One poll: reloads when the files changed since `loaded`, and then updates it. A failed
/// load leaves `loaded` alone so the next poll tries again.
fn reload_if_changed(
    config: &RustlsConfig,
    files: &Files,
    http2: bool,
    loaded: &mut Stamps,
) -> Result<bool, Error> {
    let now = stamps(files);
    if now == *loaded {
        return Ok(false);
    }
    config.reload_from_config(Arc::new(server_config(files, http2)?));
    *loaded = now;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls");

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("gangplank-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Copies fixture pair `name` over `dir/tls.{crt,key}` and stamps them with `mtime`.
    fn install_pair(dir: &Path, name: &str, mtime: SystemTime) -> Files {
        for ext in ["crt", "key"] {
            let to = dir.join(format!("tls.{ext}"));
            std::fs::copy(format!("{FIXTURES}/{name}.{ext}"), &to).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&to)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
        Files {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            client_ca: None,
            client_name: None,
        }
    }

    #[tokio::test]
    async fn a_rewritten_certificate_is_swapped_in_and_an_unchanged_one_is_not_reloaded() {
        let dir = TempDir::new("tls-reload");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let files = install_pair(&dir.0, "a", t0);
        let config = load(&files, true).await.unwrap();
        let mut loaded = stamps(&files);
        let first = config.get_inner();

        assert!(!reload_if_changed(&config, &files, true, &mut loaded).unwrap());
        assert!(Arc::ptr_eq(&first, &config.get_inner()));

        install_pair(&dir.0, "b", t0 + Duration::from_secs(60));
        assert!(reload_if_changed(&config, &files, true, &mut loaded).unwrap());
        assert!(!Arc::ptr_eq(&first, &config.get_inner()));
    }

    #[tokio::test]
    async fn a_half_written_pair_keeps_the_old_certificate_and_is_retried() {
        let dir = TempDir::new("tls-half");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let files = install_pair(&dir.0, "a", t0);
        let config = load(&files, true).await.unwrap();
        let mut loaded = stamps(&files);
        let first = config.get_inner();

        std::fs::write(&files.cert, "not a certificate").unwrap();
        let err = reload_if_changed(&config, &files, true, &mut loaded).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to load TLS certificate"),
            "{err}"
        );
        assert!(Arc::ptr_eq(&first, &config.get_inner()));

        install_pair(&dir.0, "b", t0 + Duration::from_secs(120));
        assert!(reload_if_changed(&config, &files, true, &mut loaded).unwrap());
    }

    #[tokio::test]
    async fn a_missing_key_file_is_a_clear_error() {
        let files = Files {
            cert: "/nonexistent/tls.crt".into(),
            key: "/nonexistent/tls.key".into(),
            client_ca: None,
            client_name: None,
        };
        let err = load(&files, true).await.unwrap_err();
        assert!(
            err.to_string().starts_with(
                "failed to load TLS certificate /nonexistent/tls.crt and key /nonexistent/tls.key: "
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_client_ca_file_without_certificates_is_a_clear_error() {
        let dir = TempDir::new("tls-empty-ca");
        let mut files = install_pair(&dir.0, "a", SystemTime::now());
        let ca = dir.0.join("ca.crt");
        std::fs::write(&ca, "").unwrap();
        files.client_ca = Some(ca.clone());
        let err = load(&files, true).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "failed to load client CA {}: it holds no PEM certificate",
                ca.display()
            )
        );
    }

    #[tokio::test]
    async fn a_rewritten_client_ca_is_swapped_in() {
        let dir = TempDir::new("tls-ca-reload");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut files = install_pair(&dir.0, "a", t0);
        let ca = dir.0.join("ca.crt");
        std::fs::copy(format!("{FIXTURES}/ca.crt"), &ca).unwrap();
        files.client_ca = Some(ca.clone());
        let config = load(&files, true).await.unwrap();
        let mut loaded = stamps(&files);
        let first = config.get_inner();

        std::fs::copy(format!("{FIXTURES}/stranger.crt"), &ca).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&ca)
            .unwrap()
            .set_modified(t0 + Duration::from_secs(60))
            .unwrap();
        assert!(reload_if_changed(&config, &files, true, &mut loaded).unwrap());
        assert!(!Arc::ptr_eq(&first, &config.get_inner()));
    }

    #[test]
    fn a_certificates_common_name_is_read_from_its_subject() {
        let names = |name: &str| {
            let der = CertificateDer::from_pem_file(format!("{FIXTURES}/{name}.crt")).unwrap();
            common_names(webpki::EndEntityCert::try_from(&der).unwrap().subject())
        };
        assert_eq!(names("client"), ["system:kube-scheduler"]);
        assert_eq!(names("replica"), ["gangplank.gangplank-system.svc"]);
    }

    #[test]
    fn a_subject_that_does_not_parse_has_no_common_name() {
        assert!(common_names(&[0x31, 0x85, 0xff]).is_empty());
        assert!(common_names(&[0x31, 0x05, 0x30]).is_empty());
    }
}
