//! Two replicas and one Lease: a second `gangplank serve`, started beside the one `e2e/up` runs
//! with the same flags but its own ports and name, follows while the first leads, takes over
//! when the first is killed (the first comes back as a follower), and hands back when it is
//! stopped. And two sidecars of schedulers: each leads only while the scheduler's Lease names
//! the scheduler beside it.

use std::process::{Child, Command, Stdio};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::support::{Cluster, bound_with_prefix, eventually, gangplank_ctl, managed_pod, run_dir};

const LEASE_NAMESPACE: &str = "gangplank-system";
const LEASE: &str = "gangplank";

/// A second Gangplank: the first's flags with its own ports and identity. Killed when dropped.
struct Standby {
    child: Child,
    identity: String,
    metrics_url: String,
    extender_addr: String,
}

impl Standby {
    fn start() -> Standby {
        Standby::start_with("standby", &[])
    }

    /// A second Gangplank named `prefix-<random>`, with `extra` flags.
    fn start_with(prefix: &str, extra: &[&str]) -> Standby {
        let args = std::fs::read_to_string(run_dir().join("gangplank.args")).unwrap();
        let mut args: Vec<String> = args.lines().map(str::to_owned).collect();
        let mut own = |flag: &str| {
            let at = args.iter().position(|a| a == flag).unwrap() + 1;
            args[at] = format!("127.0.0.1:{}", free_port());
            args[at].clone()
        };
        let extender_addr = own("--extender-addr");
        own("--webhook-addr");
        let metrics_addr = own("--metrics-addr");
        let identity = crate::support::unique(prefix);
        args.extend(["--leader-election-identity".to_owned(), identity.clone()]);
        args.extend(extra.iter().map(|a| a.to_string()));
        let log = std::fs::File::create(run_dir().join(format!("logs/gangplank-{identity}.log")))
            .unwrap();
        let child = Command::new(run_dir().join("bin/gangplank"))
            .args(&args)
            .env("KUBECONFIG", run_dir().join("gangplank.kubeconfig"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("failed to start a second gangplank");
        Standby {
            child,
            identity,
            metrics_url: format!("http://{metrics_addr}"),
            extender_addr,
        }
    }

    async fn metrics(&self) -> Option<crate::support::Metrics> {
        let body = reqwest::get(format!("{}/metrics", self.metrics_url))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        Some(crate::support::Metrics::parse(&body))
    }

    async fn leads(&self) -> Option<bool> {
        Some(self.metrics().await?.sum("gangplank_leader", &[]) == 1.0)
    }

    /// SIGTERM, and wait for it to exit: a graceful stop gives the Lease up.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
        let exited = self.child.wait().unwrap();
        assert!(exited.success(), "the standby exited with {exited}");
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt(LEASE).await.ok()??.spec?.holder_identity
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_second_replica_follows_takes_over_when_the_leader_dies_and_hands_back_on_stop() {
    let cluster = Cluster::connect().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let leader = eventually("a leader holds the Lease", 30, || holder(&leases)).await;
    assert!(
        cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_leader", &[])
            == 1.0
    );

    let standby = Standby::start();
    eventually("the standby answers its metrics port", 30, || async {
        standby.leads().await.map(|_| ())
    })
    .await;
    assert_eq!(standby.leads().await, Some(false), "the standby follows");
    assert_eq!(holder(&leases).await.as_deref(), Some(leader.as_str()));
    assert!(
        std::net::TcpStream::connect(&standby.extender_addr).is_err(),
        "a follower does not serve the extender"
    );

    gangplank_ctl("kill");
    let took_over = std::time::Instant::now();
    eventually("the standby leads", 30, || async {
        let leads = standby.leads().await == Some(true);
        let holds = holder(&leases).await.as_deref() == Some(standby.identity.as_str());
        (leads && holds).then_some(())
    })
    .await;
    eprintln!("failover took {:?}", took_over.elapsed());
    eventually("the standby serves the extender", 30, || async {
        std::net::TcpStream::connect(&standby.extender_addr)
            .ok()
            .map(|_| ())
    })
    .await;
    // The first comes back as a follower; its webhooks take pods again, and the new leader's
    // admission loop releases them.
    gangplank_ctl("start");
    assert!(
        cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_leader", &[])
            == 0.0
    );
    let ns = cluster.namespace("leader").await;
    let pods = ns.api::<Pod>();
    let labels = json!({"labels": {"scheduling.gangplank.dev/queue": "default"}});
    pods.create(
        &PostParams::default(),
        &managed_pod("solo", None, 1, labels),
    )
    .await
    .unwrap();
    eventually(
        "the new leader releases the pod from the gate",
        30,
        || async {
            let pod = pods.get("solo").await.ok()?;
            let gates = pod.spec?.scheduling_gates.unwrap_or_default();
            gates.is_empty().then_some(())
        },
    )
    .await;

    // The standby's graceful stop hands the Lease back; the first, leading again, serves the
    // extender the scheduler calls, and the pod is bound.
    standby.stop();
    eventually("the first leads again", 30, || async {
        let leads = cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_leader", &[])
            == 1.0;
        let holds = holder(&leases).await.as_deref() == Some(leader.as_str());
        (leads && holds).then_some(())
    })
    .await;
    eventually("the pod bound through the first's extender", 60, || async {
        (bound_with_prefix(&pods, "solo").await.len() == 1).then_some(())
    })
    .await;
    ns.delete().await;
}

/// The scheduler's Lease as kube-scheduler writes it: `<host>_<uuid>`.
fn scheduler_lease(host: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {
            "holderIdentity": format!("{host}_{}", crate::support::unique("uuid")),
            "leaseDurationSeconds": 15,
        },
    }))
    .unwrap()
}

/// Brings the suite's Gangplank back and removes the test's scheduler Lease, also when the
/// test fails.
struct SidecarsGuard;

impl Drop for SidecarsGuard {
    fn drop(&mut self) {
        let run = run_dir();
        let _ = Command::new(run.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(run.join("kubeconfig"))
            .args([
                "-n",
                "kube-system",
                "delete",
                "lease",
                "kube-scheduler",
                "--ignore-not-found",
            ])
            .status();
        gangplank_ctl("start");
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_sidecar_leads_only_while_the_scheduler_beside_it_leads() {
    let cluster = Cluster::connect().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let schedulers: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-system");
    // The suite's Gangplank gives its Lease up; two sidecars take part instead.
    gangplank_ctl("stop");
    let _guard = SidecarsGuard;
    let follow = ["--leader-election-follow", "kube-system/kube-scheduler"];
    let a = Standby::start_with("side-a", &follow);
    let b = Standby::start_with("side-b", &follow);
    schedulers
        .create(&PostParams::default(), &scheduler_lease(&a.identity))
        .await
        .unwrap();
    eventually(
        "the sidecar beside the leading scheduler leads",
        30,
        || async {
            let holds = holder(&leases).await.as_deref() == Some(a.identity.as_str());
            (holds && a.leads().await == Some(true)).then_some(())
        },
    )
    .await;
    assert_eq!(b.leads().await, Some(false), "the other sidecar follows");

    // The scheduler's Lease moves to the other node: its sidecar takes over.
    let moved = std::time::Instant::now();
    let mut lease = schedulers.get("kube-scheduler").await.unwrap();
    lease.spec = scheduler_lease(&b.identity).spec;
    schedulers
        .replace("kube-scheduler", &PostParams::default(), &lease)
        .await
        .unwrap();
    eventually("the sidecar beside the new scheduler leads", 30, || async {
        let holds = holder(&leases).await.as_deref() == Some(b.identity.as_str());
        let only_b = b.leads().await == Some(true) && a.leads().await == Some(false);
        (holds && only_b).then_some(())
    })
    .await;
    eprintln!("the lead followed the scheduler in {:?}", moved.elapsed());
    b.stop();
    a.stop();
}
