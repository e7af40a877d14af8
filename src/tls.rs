//! TLS for the extender port, with certificate rotation.
//!
//! cert-manager (or the projected Secret behind it) rewrites the certificate files in place
//! before they expire. Rather than restarting, Gangplank polls the files' modification times
//! and, when either changed, loads the pair again and swaps it into the running server: new
//! connections get the new certificate, open ones finish with the old. A pair that fails to
//! load (for example, the key written but not yet the certificate) keeps the old one serving
//! and is retried at the next poll.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use axum_server::tls_rustls::RustlsConfig;
use tokio_util::sync::CancellationToken;

/// How often the certificate files are checked for changes.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to load TLS certificate {cert} and key {key}: {why}")]
    Load {
        cert: PathBuf,
        key: PathBuf,
        why: std::io::Error,
    },
}

/// Installs ring as the process-wide rustls crypto provider, once. The crate is built without
/// a default provider so the choice is explicit.
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Loads the certificate chain and key.
pub async fn load(cert: &Path, key: &Path) -> Result<RustlsConfig, Error> {
    install_crypto_provider();
    RustlsConfig::from_pem_file(cert, key)
        .await
        .map_err(|why| Error::Load {
            cert: cert.to_owned(),
            key: key.to_owned(),
            why,
        })
}

/// Modification times of the certificate and key; `None` for a file that cannot be read.
type Stamps = (Option<SystemTime>, Option<SystemTime>);

fn stamps(cert: &Path, key: &Path) -> Stamps {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (mtime(cert), mtime(key))
}

/// Reloads `config` from the files whenever their modification time changes, until shutdown.
pub async fn reload_on_change(
    config: RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let mut loaded = stamps(&cert, &key);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match reload_if_changed(&config, &cert, &key, &mut loaded).await {
            Ok(true) => tracing::info!(cert = %cert.display(), "reloaded TLS certificate"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "keeping the previous TLS certificate"),
        }
    }
}

/// One poll: reloads when the files changed since `loaded`, and then updates it. A failed
/// load leaves `loaded` alone so the next poll tries again.
async fn reload_if_changed(
    config: &RustlsConfig,
    cert: &Path,
    key: &Path,
    loaded: &mut Stamps,
) -> Result<bool, Error> {
    let now = stamps(cert, key);
    if now == *loaded {
        return Ok(false);
    }
    config
        .reload_from_pem_file(cert, key)
        .await
        .map_err(|why| Error::Load {
            cert: cert.to_owned(),
            key: key.to_owned(),
            why,
        })?;
    *loaded = now;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

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
    fn install_pair(dir: &Path, name: &str, mtime: SystemTime) -> (PathBuf, PathBuf) {
        let mut out = Vec::new();
        for ext in ["crt", "key"] {
            let to = dir.join(format!("tls.{ext}"));
            std::fs::copy(format!("{FIXTURES}/{name}.{ext}"), &to).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&to)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
            out.push(to);
        }
        (out[0].clone(), out[1].clone())
    }

    #[tokio::test]
    async fn a_rewritten_certificate_is_swapped_in_and_an_unchanged_one_is_not_reloaded() {
        let dir = TempDir::new("tls-reload");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let (cert, key) = install_pair(&dir.0, "a", t0);
        let config = load(&cert, &key).await.unwrap();
        let mut loaded = stamps(&cert, &key);
        let first = config.get_inner();

        assert!(
            !reload_if_changed(&config, &cert, &key, &mut loaded)
                .await
                .unwrap()
        );
        assert!(Arc::ptr_eq(&first, &config.get_inner()));

        install_pair(&dir.0, "b", t0 + Duration::from_secs(60));
        assert!(
            reload_if_changed(&config, &cert, &key, &mut loaded)
                .await
                .unwrap()
        );
        assert!(!Arc::ptr_eq(&first, &config.get_inner()));
    }

    #[tokio::test]
    async fn a_half_written_pair_keeps_the_old_certificate_and_is_retried() {
        let dir = TempDir::new("tls-half");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let (cert, key) = install_pair(&dir.0, "a", t0);
        let config = load(&cert, &key).await.unwrap();
        let mut loaded = stamps(&cert, &key);
        let first = config.get_inner();

        std::fs::write(&cert, "not a certificate").unwrap();
        let err = reload_if_changed(&config, &cert, &key, &mut loaded)
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to load TLS certificate"),
            "{err}"
        );
        assert!(Arc::ptr_eq(&first, &config.get_inner()));

        install_pair(&dir.0, "b", t0 + Duration::from_secs(120));
        assert!(
            reload_if_changed(&config, &cert, &key, &mut loaded)
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn a_missing_key_file_is_a_clear_error() {
        let err = load(
            Path::new("/nonexistent/tls.crt"),
            Path::new("/nonexistent/tls.key"),
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "failed to load TLS certificate /nonexistent/tls.crt and key /nonexistent/tls.key: "
            ),
            "{err}"
        );
    }
}
