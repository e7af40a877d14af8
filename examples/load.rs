//! End-to-end load run against the local control plane (`e2e/up`): creates pods as fast as the
//! API server takes them, a share of them in gangs (PodGroups of `--gang-size`), and measures
//! how long the stock scheduler (with or without Gangplank, per `e2e/up --mode`) takes to bind
//! them all. `e2e/load-compare` runs it for each mode on the same cluster shape and prints the
//! ratios.
//!
//! Output: one JSON line with the mode, counts and timings, for the comparison script.

mod common;

use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, stream};
use gangplank::api::{PodGroup, PodGroupSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// The cluster's kubeconfig (e2e/.run/kubeconfig).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: std::path::PathBuf,
    /// Pods to create.
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    /// Share of the pods that are members of gangs, in percent.
    #[arg(long, default_value_t = 33)]
    gang_percent: usize,
    /// Members per gang (minMember).
    #[arg(long, default_value_t = 8)]
    gang_size: usize,
    /// Concurrent create calls.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// Label for the output line (the e2e/up mode).
    #[arg(long, default_value = "unknown")]
    mode: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = common::client(&args.kubeconfig).await?;

    let ns_name = format!("load-{}", std::process::id());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns_name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    wait_for_default_service_account(&client, &ns_name).await?;

    let gang_pods = args.pods * args.gang_percent / 100 / args.gang_size * args.gang_size;
    let gangs = gang_pods / args.gang_size;
    let groups: Api<PodGroup> = Api::namespaced(client.clone(), &ns_name);
    for g in 0..gangs {
        let mut spec = PodGroupSpec::with_min_member(args.gang_size as i32);
        spec.schedule_timeout_seconds = Some(60);
        groups
            .create(
                &PostParams::default(),
                &PodGroup::new(&format!("gang-{g}"), spec),
            )
            .await?;
    }

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns_name);
    let started = Instant::now();
    let created = stream::iter(0..args.pods)
        .map(|i| {
            let pods = pods.clone();
            let gang = (i < gang_pods).then(|| format!("gang-{}", i / args.gang_size));
            async move { pods.create(&PostParams::default(), &pod(i, gang)).await }
        })
        .buffer_unordered(args.concurrency)
        .filter(|r| std::future::ready(r.is_ok()))
        .count()
        .await;
    let create_seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        created == args.pods,
        "only {created} of {} pods created",
        args.pods
    );

    let deadline = started + Duration::from_secs(args.timeout);
    let bound = loop {
        let list = pods.list(&ListParams::default()).await?;
        let bound = list
            .items
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .count();
        if bound == args.pods || Instant::now() >= deadline {
            break bound;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let schedule_seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "mode": args.mode,
            "pods": args.pods,
            "gang_pods": gang_pods,
            "gangs": gangs,
            "bound": bound,
            "create_seconds": round(create_seconds),
            "all_bound_seconds": round(schedule_seconds),
            "pods_per_second": round(bound as f64 / schedule_seconds),
        })
    );
    Api::<Namespace>::all(client)
        .delete(&ns_name, &DeleteParams::default())
        .await?;
    anyhow::ensure!(
        bound == args.pods,
        "only {bound} of {} pods bound",
        args.pods
    );
    Ok(())
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn pod(i: usize, gang: Option<String>) -> Pod {
    let mut labels = serde_json::Map::new();
    if let Some(gang) = gang {
        labels.insert("scheduling.gangplank.dev/pod-group".into(), gang.into());
    }
    serde_json::from_value(json!({
        "metadata": {"name": format!("p-{i}"), "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    }))
    .expect("a valid pod")
}

async fn wait_for_default_service_account(client: &Client, ns: &str) -> anyhow::Result<()> {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), ns);
    for _ in 0..300 {
        if accounts.get_opt("default").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no default ServiceAccount in {ns}")
}
