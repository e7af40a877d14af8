//! What the load generators share: a client for the local control plane.

use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A client from the kubeconfig at `path` (e2e/.run/kubeconfig), patient with a busy API
/// server (reads time out after 120 s).
pub async fn client(path: &std::path::Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let mut config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    config.read_timeout = Some(Duration::from_secs(120));
    Ok(Client::try_from(config)?)
}
