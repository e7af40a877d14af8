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
//! signed for client authentication, or the handshake fails: only the scheduler, holding that
//! certificate, can reach the extender's verbs (bind above all).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum_server::tls_rustls::RustlsConfig;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
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

/// Loads the files into a server configuration (HTTP/2 and HTTP/1.1 offered by ALPN).
pub async fn load(files: &Files) -> Result<RustlsConfig, Error> {
    Ok(RustlsConfig::from_config(Arc::new(server_config(files)?)))
}

fn server_config(files: &Files) -> Result<ServerConfig, Error> {
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
        Some(path) => builder.with_client_cert_verifier(client_verifier(path)?),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| load_error(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn client_verifier(
    path: &Path,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, Error> {
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
        match reload_if_changed(&config, &files, &mut loaded) {
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
    loaded: &mut Stamps,
) -> Result<bool, Error> {
    let now = stamps(files);
    if now == *loaded {
        return Ok(false);
    }
    config.reload_from_config(Arc::new(server_config(files)?));
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
        }
    }

    #[tokio::test]
    async fn a_rewritten_certificate_is_swapped_in_and_an_unchanged_one_is_not_reloaded() {
        let dir = TempDir::new("tls-reload");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let files = install_pair(&dir.0, "a", t0);
        let config = load(&files).await.unwrap();
        let mut loaded = stamps(&files);
        let first = config.get_inner();

        assert!(!reload_if_changed(&config, &files, &mut loaded).unwrap());
        assert!(Arc::ptr_eq(&first, &config.get_inner()));

        install_pair(&dir.0, "b", t0 + Duration::from_secs(60));
        assert!(reload_if_changed(&config, &files, &mut loaded).unwrap());
        assert!(!Arc::ptr_eq(&first, &config.get_inner()));
    }

    #[tokio::test]
    async fn a_half_written_pair_keeps_the_old_certificate_and_is_retried() {
        let dir = TempDir::new("tls-half");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let files = install_pair(&dir.0, "a", t0);
        let config = load(&files).await.unwrap();
        let mut loaded = stamps(&files);
        let first = config.get_inner();

        std::fs::write(&files.cert, "not a certificate").unwrap();
        let err = reload_if_changed(&config, &files, &mut loaded).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to load TLS certificate"),
            "{err}"
        );
        assert!(Arc::ptr_eq(&first, &config.get_inner()));

        install_pair(&dir.0, "b", t0 + Duration::from_secs(120));
        assert!(reload_if_changed(&config, &files, &mut loaded).unwrap());
    }

    #[tokio::test]
    async fn a_missing_key_file_is_a_clear_error() {
        let files = Files {
            cert: "/nonexistent/tls.crt".into(),
            key: "/nonexistent/tls.key".into(),
            client_ca: None,
        };
        let err = load(&files).await.unwrap_err();
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
        let err = load(&files).await.unwrap_err();
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
        let config = load(&files).await.unwrap();
        let mut loaded = stamps(&files);
        let first = config.get_inner();

        std::fs::copy(format!("{FIXTURES}/stranger.crt"), &ca).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&ca)
            .unwrap()
            .set_modified(t0 + Duration::from_secs(60))
            .unwrap();
        assert!(reload_if_changed(&config, &files, &mut loaded).unwrap());
        assert!(!Arc::ptr_eq(&first, &config.get_inner()));
    }
}
