//! Fills the local control plane (`e2e/up`) with pods already bound to its nodes, for
//! `e2e/scale-ready`: `--pods` pods of 100m CPU and 128Mi, `spec.nodeName` set round-robin over
//! the cluster's nodes, created `--concurrency` at a time in namespace `fill`. Plain pods (no
//! group, no queue): a pod created bound cannot carry a scheduling gate, so Gangplank's webhook
//! leaves it alone, and the model still holds every one of them (pods, per-node use).
//!
//! Output: one JSON line with the counts and the time the creates took.

mod common;

use std::time::Instant;

use clap::Parser;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const NAMESPACE: &str = "fill";

#[derive(Parser)]
struct Args {
    /// The cluster's kubeconfig (e2e/.run/kubeconfig).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: std::path::PathBuf,
    /// Pods to create.
    #[arg(long, default_value_t = 100_000)]
    pods: usize,
    /// Concurrent create calls.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = common::client(&args.kubeconfig).await?;

    let nodes: Vec<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    anyhow::ensure!(!nodes.is_empty(), "the cluster has no nodes");

    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }

    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
    let started = Instant::now();
    let failed = stream::iter(0..args.pods)
        .map(|i| {
            let pods = pods.clone();
            let node = nodes[i % nodes.len()].clone();
            async move { pods.create(&PostParams::default(), &pod(i, &node)).await }
        })
        .buffer_unordered(args.concurrency)
        .filter(|r| std::future::ready(r.is_err()))
        .count()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "nodes": nodes.len(),
            "pods": args.pods - failed,
            "create_seconds": (seconds * 100.0).round() / 100.0,
        })
    );
    anyhow::ensure!(failed == 0, "{failed} of {} creates failed", args.pods);
    Ok(())
}

fn pod(i: usize, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("fill-{i}")},
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
            }],
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }))
    .expect("a valid pod")
}
