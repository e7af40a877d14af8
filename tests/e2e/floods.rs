//! Floods of Gangplank's ports by a tenant, who needs no permission to open connections: the
//! stock scheduler's and the API server's calls must all get through while the flood lasts,
//! and a tenant's pods are gated, admitted and bound as without it
//! (docs/decisions/connection-places.md). The flood here is what any pod of the cluster can
//! do: connections that send nothing (or a TLS ClientHello cut short), from many loopback
//! addresses or one, opened again as soon as Gangplank closes them.
//!
//! The suite runs one flood (1,000 idle connections from 200 addresses on each port, five
//! each, as a Deployment of 200 replicas can hold); `e2e/flood` runs this test again for each
//! flood of docs/reliability.md, choosing it with `GP_FLOOD` (`CONNECTIONS SOURCES
//! FIRST_SOURCE HELLO [PORTS]`, e.g. `1000 1 127.0.0.1 none`, `5000 1000 127.0.1.2 partial`
//! or `10000 1000 127.0.1.2 none webhooks`; PORTS is `webhooks`, `extender` or `both`, the
//! default) and `GP_FLOOD_PODS`, and reads the JSON line the test prints.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gangplank::api::QueueSpec;
use gangplank::api::labels::{MANAGED_RESOURCE, POD_GROUP_LABEL, QUEUE_LABEL};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::queues::{QueueGuard, create_queue, delete_queue};
use crate::support::{Cluster, eventually, run_dir};
use crate::tenancy::Tenant;

/// Connections held open against one address, each from the `i % sources`-th address after
/// `first_source`, sending `first` and then nothing, each opened again as soon as the server
/// closes it, until dropped.
pub struct Flood {
    stop: CancellationToken,
    /// Connections opened so far.
    pub opened: Arc<AtomicU64>,
}

impl Flood {
    pub fn start(addr: SocketAddr, shape: &Shape) -> Flood {
        let (stop, opened) = (CancellationToken::new(), Arc::new(AtomicU64::new(0)));
        let first: &'static [u8] = if shape.partial_hello {
            &HELLO_CUT_SHORT
        } else {
            b""
        };
        for i in 0..shape.connections {
            let source = SocketAddr::from((shape.source(i), 0));
            let (stop, opened) = (stop.clone(), opened.clone());
            tokio::spawn(async move {
                while !stop.is_cancelled() {
                    let Ok(mut stream) = connect(source, addr).await else {
                        // The kernel's accept queue is full: try again shortly, as a flood would.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    };
                    opened.fetch_add(1, Ordering::Relaxed);
                    let _ = stream.write_all(first).await;
                    let mut byte = [0u8; 1];
                    tokio::select! {
                        _ = stream.read(&mut byte) => {}
                        () = stop.cancelled() => {}
                    }
                }
            });
        }
        Flood { stop, opened }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The first bytes of a TLS ClientHello (a record header announcing 512 bytes, and the
/// handshake header), as a client that stops mid-hello sends them.
const HELLO_CUT_SHORT: [u8; 9] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc];

/// What a flood is: how many connections on each port, from how many addresses counted from
/// which, and whether each sends a ClientHello cut short.
#[derive(Debug)]
pub struct Shape {
    connections: usize,
    sources: usize,
    first_source: std::net::Ipv4Addr,
    partial_hello: bool,
    /// The servers flooded: `webhooks`, `extender`, or both.
    servers: Vec<&'static str>,
}

impl Shape {
    /// `GP_FLOOD`, else the suite's flood: 1,000 idle connections from 127.0.0.2 to .201.
    fn from_env() -> Shape {
        let text = std::env::var("GP_FLOOD").unwrap_or_else(|_| "1000 200 127.0.0.2 none".into());
        let words: Vec<&str> = text.split_whitespace().collect();
        let (&[connections, sources, first_source, hello], ports) =
            words.split_at(4.min(words.len()))
        else {
            panic!(
                "GP_FLOOD is CONNECTIONS SOURCES FIRST_SOURCE none|partial [webhooks|extender|both], not {text:?}"
            )
        };
        let servers = match ports {
            [] | ["both"] => vec!["webhooks", "extender"],
            ["webhooks"] => vec!["webhooks"],
            ["extender"] => vec!["extender"],
            _ => panic!("GP_FLOOD's last word is webhooks, extender or both, not {ports:?}"),
        };
        let shape = Shape {
            connections: connections.parse().expect("GP_FLOOD's connections"),
            sources: sources.parse().expect("GP_FLOOD's sources"),
            first_source: first_source.parse().expect("GP_FLOOD's first source"),
            partial_hello: hello == "partial",
            servers,
        };
        assert!(
            shape.first_source.is_loopback()
                && (1..=10_000).contains(&shape.sources)
                && shape.source(shape.sources - 1).is_loopback(),
            "{shape:?}: 1 to 10,000 sources, all in 127.0.0.0/8"
        );
        shape
    }

    /// The address the `i`-th connection comes from.
    fn source(&self, i: usize) -> std::net::Ipv4Addr {
        let offset = u32::try_from(i % self.sources).expect("at most 10,000 sources");
        std::net::Ipv4Addr::from(u32::from(self.first_source) + offset)
    }
}

async fn connect(source: SocketAddr, addr: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(source)?;
    tokio::time::timeout(Duration::from_secs(5), socket.connect(addr))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)?
}

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("https://")
        .parse()
        .unwrap_or_else(|e| panic!("{url} is not https://IP:PORT: {e}"))
}

/// Calls of the API server to Gangplank's webhooks that failed (could not be made, or got no
/// answer in time): the API server's own count in its metrics `text`, summed over
/// Gangplank's webhooks.
fn failed_webhook_calls(text: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("apiserver_admission_webhook_rejection_count{"))
        .filter(|l| l.contains(r#"error_type="calling_webhook_error""#))
        .filter(|l| l.contains(r#"gangplank.dev""#))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Calls of the scheduler to Gangplank's extender that failed: the scheduler logs each with
/// the URL it posted to (`Post "https://…/scheduler/filter": …`).
fn failed_extender_calls(cluster: &Cluster) -> usize {
    let url = cluster.url("GANGPLANK_EXTENDER_URL");
    let log = std::fs::read_to_string(run_dir().join("logs/kube-scheduler.log"))
        .expect("failed to read the scheduler's log");
    let call = format!(r#"Post \"{url}/scheduler/"#);
    let plain = format!(r#"Post "{url}/scheduler/"#);
    log.lines()
        .filter(|l| l.contains(&call) || l.contains(&plain))
        .count()
}

/// The sum of a histogram's buckets in Prometheus text, by upper bound, over the series whose
/// line contains every one of `filters`.
fn buckets(text: &str, metric: &str, filters: &[&str]) -> std::collections::BTreeMap<u64, f64> {
    let mut sums = std::collections::BTreeMap::new();
    let prefix = format!("{metric}_bucket{{");
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        if !filters.iter().all(|f| line.contains(f)) {
            continue;
        }
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some(le) = labels
            .split("le=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
        else {
            continue;
        };
        let bound = if le == "+Inf" {
            u64::MAX
        } else {
            (le.parse::<f64>().unwrap_or(f64::MAX) * 1e6) as u64
        };
        *sums.entry(bound).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    sums
}

/// The 99th percentile, as the upper bound of its bucket in milliseconds, of what a histogram
/// counted between `before` and `after` (`None`: nothing counted).
fn p99_ms(
    before: &std::collections::BTreeMap<u64, f64>,
    after: &std::collections::BTreeMap<u64, f64>,
) -> Option<f64> {
    let count = |bound: &u64| after.get(bound).unwrap_or(&0.0) - before.get(bound).unwrap_or(&0.0);
    let total = after.keys().next_back().map(count)?;
    (total > 0.0).then(|| {
        let bound = after.keys().find(|b| count(b) >= 0.99 * total).unwrap();
        *bound as f64 / 1000.0
    })
}

fn api_server_metrics() -> String {
    let run = run_dir();
    let out = std::process::Command::new(run.join("bin/kubectl"))
        .arg("--kubeconfig")
        .arg(run.join("kubeconfig"))
        .args(["get", "--raw", "/metrics"])
        .output()
        .expect("failed to run kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn gangplank_metrics_text(cluster: &Cluster) -> String {
    let url = format!("{}/metrics", cluster.url("GANGPLANK_METRICS_URL"));
    reqwest::get(&url).await.unwrap().text().await.unwrap()
}

/// Gangplank's resident memory, in MiB.
fn gangplank_rss_mib() -> u64 {
    let pid = std::fs::read_to_string(run_dir().join("pids/gangplank.pid")).unwrap();
    std::fs::read_to_string(format!("/proc/{}/status", pid.trim()))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tenants_pods_and_gang_are_gated_admitted_and_bound_while_connections_flood_gangplank() {
    let shape = Shape::from_env();
    let plain_pods: usize = std::env::var("GP_FLOOD_PODS").map_or(2, |n| n.parse().unwrap());
    let cluster = Cluster::connect().await;
    let tenant = Tenant::new(&cluster, "flooded").await;
    let queue = create_queue(&cluster.client, "flooded", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let webhooks = addr_of(cluster.url("GANGPLANK_WEBHOOK_URL"));
    let extender = addr_of(cluster.url("GANGPLANK_EXTENDER_URL"));
    let rss_before = gangplank_rss_mib();

    let floods: Vec<Flood> = shape
        .servers
        .iter()
        .map(|&server| {
            let addr = if server == "webhooks" {
                webhooks
            } else {
                extender
            };
            Flood::start(addr, &shape)
        })
        .collect();
    // The flood holds the handshake places of both ports it can (all 128, or as many as it
    // opens), and the API server's and the scheduler's kept-alive connections have gone idle
    // and been closed: their next calls need new connections, which floods used to crowd out.
    let held = shape.connections.min(128) as f64;
    eventually(
        "the flood to hold its handshake places, and no connection open",
        120,
        || async {
            let metrics = cluster.gangplank_metrics().await;
            let full = shape.servers.iter().all(|server| {
                metrics.sum("gangplank_server_handshakes", &[("server", server)]) >= held
                    && metrics.sum("gangplank_server_connections", &[("server", server)]) == 0.0
            });
            full.then_some(())
        },
    )
    .await;
    let (api_before, gangplank_before) =
        (api_server_metrics(), gangplank_metrics_text(&cluster).await);
    let extender_failures = failed_extender_calls(&cluster);
    let rss_most = AtomicU64::new(gangplank_rss_mib());

    let mut names: Vec<String> = (0..plain_pods).map(|i| format!("plain-{i}")).collect();
    for name in &names {
        tenant
            .apply(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
                "spec": {"containers": [{"name": "main", "image": "trainer",
                    "resources": {"requests": {"cpu": "100m"}}}]}
            }))
            .unwrap_or_else(|e| {
                panic!("the tenant's pod {name} was refused during the flood: {e}")
            });
    }
    tenant
        .apply(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "gang"}, "spec": {"minMember": 3, "queue": queue}
        }))
        .unwrap_or_else(|e| panic!("the tenant's PodGroup was refused during the flood: {e}"));
    for i in 0..3 {
        let name = format!("gang-{i}");
        tenant
            .apply(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name,
                    "labels": {QUEUE_LABEL: queue, POD_GROUP_LABEL: "gang"}},
                "spec": {"containers": [{"name": "main", "image": "trainer",
                    "resources": {"requests": {"cpu": "2"}}}]}
            }))
            .unwrap_or_else(|e| {
                panic!("the tenant's gang member {name} was refused during the flood: {e}")
            });
        names.push(name);
    }

    let pods = tenant.mine.api::<Pod>();
    for name in &names {
        let pod = pods.get(name).await.unwrap();
        let requests = pod.spec.unwrap().containers[0]
            .resources
            .clone()
            .and_then(|r| r.requests)
            .unwrap_or_default();
        assert!(
            requests.contains_key(MANAGED_RESOURCE),
            "Gangplank's webhook took {name} in (it carries the marker): {requests:?}"
        );
    }
    eventually(
        "every pod of the tenant bound during the flood",
        180,
        || async {
            rss_most.fetch_max(gangplank_rss_mib(), Ordering::Relaxed);
            let list = pods.list(&Default::default()).await.ok()?;
            let bound = list
                .items
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            (bound == names.len()).then_some(())
        },
    )
    .await;
    let (api_after, gangplank_after) =
        (api_server_metrics(), gangplank_metrics_text(&cluster).await);
    let opened: u64 = floods
        .iter()
        .map(|f| f.opened.load(Ordering::Relaxed))
        .sum();
    drop(floods);

    let failed_webhook_calls = failed_webhook_calls(&api_after) - failed_webhook_calls(&api_before);
    let failed_extender_calls = failed_extender_calls(&cluster) - extender_failures;
    let webhook = "apiserver_admission_webhook_admission_duration_seconds";
    let extender_metric = "gangplank_extender_request_duration_seconds";
    let measured = json!({
        "flood": format!("{shape:?}"),
        "pods": names.len(),
        "connections_opened": opened,
        "failed_webhook_calls": failed_webhook_calls,
        "failed_extender_calls": failed_extender_calls,
        "webhook_call_p99_ms_as_the_api_server_saw_it": p99_ms(
            &buckets(&api_before, webhook, &["gangplank.dev"]),
            &buckets(&api_after, webhook, &["gangplank.dev"])),
        "filter_p99_ms_as_gangplank_answered_it": p99_ms(
            &buckets(&gangplank_before, extender_metric, &[r#"verb="filter""#]),
            &buckets(&gangplank_after, extender_metric, &[r#"verb="filter""#])),
        "rss_mib_before": rss_before,
        "rss_mib_most_while_flooded": rss_most.load(Ordering::Relaxed),
    });
    println!("flood measured: {measured}");
    assert_eq!(
        failed_webhook_calls, 0.0,
        "no call of the API server to Gangplank's webhooks failed during the flood: {measured}"
    );
    assert_eq!(
        failed_extender_calls, 0,
        "no call of the scheduler to Gangplank's extender failed during the flood: {measured}"
    );
    let metrics = cluster.gangplank_metrics().await;
    if shape.connections > 128 {
        assert!(
            metrics.sum(
                "gangplank_server_connections_closed_total",
                &[("reason", "shed_in_handshake")]
            ) > 0.0,
            "the flood's connections were shed"
        );
    }
    assert!(
        opened >= 2 * shape.connections as u64,
        "the flood opened its connections ({opened})"
    );

    tenant.delete().await;
    delete_queue(&cluster.client, &queue).await;
}
