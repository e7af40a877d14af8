//! Queues through a real API server: fair share between weighted queues, capability as a hard
//! cap, guarantees held for idle queues, priority, preemption, reclaim and backfill. The
//! cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use gangplank::api::{PodGroup, Queue, QueueSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

pub use crate::support::delete_queue;
use crate::support::{
    Cluster, TestNamespace, events_about, eventually, holds_for, managed_pod, pod, pod_group,
    running, unique,
};

/// Creates a queue named `prefix-<nanos>` with `spec`; returns its name.
pub async fn create_queue(client: &Client, prefix: &str, spec: QueueSpec) -> String {
    let name = unique(prefix);
    Api::<Queue>::all(client.clone())
        .create(&PostParams::default(), &Queue::new(&name, spec))
        .await
        .unwrap_or_else(|e| panic!("failed to create queue {name}: {e}"));
    name
}

/// Deletes a queue whose guarantee would hold room back from later tests when the test that
/// made it fails (declare it before the test's namespace, which goes first).
pub struct QueueGuard(pub String);

impl Drop for QueueGuard {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let run = crate::support::run_dir();
        let status = std::process::Command::new(run.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(run.join("kubeconfig"))
            .args(["delete", "queue", &self.0, "--wait=true", "--timeout=60s"])
            .status();
        eprintln!("deleted the failed test's queue {}: {status:?}", self.0);
    }
}

/// Queues `prefix-heavy-*` of weight 2 and `prefix-light-*` of weight 1.
async fn weighted_two_to_one(client: &Client, prefix: &str) -> (String, String) {
    let heavy = QueueSpec {
        weight: 2,
        ..QueueSpec::default()
    };
    (
        create_queue(client, &format!("{prefix}-heavy"), heavy).await,
        create_queue(client, &format!("{prefix}-light"), QueueSpec::default()).await,
    )
}

pub fn cpu_cap(cpu: &str) -> QueueSpec {
    QueueSpec {
        capability: [("cpu".to_string(), Quantity(cpu.to_string()))].into(),
        ..QueueSpec::default()
    }
}

/// A gang `name` of `size` pods of `cpu` CPUs in `queue`; members finish `run_for` after they
/// start when given; `priority_class` on every member when given.
pub async fn create_gang(
    ns: &TestNamespace,
    queue: &str,
    name: &str,
    size: usize,
    cpu: u32,
    run_for: Option<&str>,
    priority_class: Option<&str>,
) {
    let mut group = pod_group(name, size as i32, None);
    group.spec.queue = Some(queue.to_owned());
    ns.api::<PodGroup>()
        .create(&PostParams::default(), &group)
        .await
        .unwrap_or_else(|e| panic!("failed to create PodGroup {name}: {e}"));
    let extra = match run_for {
        Some(delay) => json!({"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": delay}}),
        None => json!({}),
    };
    let pods = ns.api::<Pod>();
    for i in 0..size {
        let mut member = managed_pod(&format!("{name}-{i}"), Some(name), cpu, extra.clone());
        member.spec.as_mut().unwrap().priority_class_name = priority_class.map(str::to_owned);
        pods.create(&PostParams::default(), &member)
            .await
            .unwrap_or_else(|e| panic!("failed to create pod {name}-{i}: {e}"));
    }
}

/// CPUs held by bound, unfinished pods of `ns`, by the first `-`-separated part of their name.
pub async fn running_cpu_by_prefix(pods: &Api<Pod>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for p in pods.list(&Default::default()).await.unwrap().items {
        let spec = p.spec.as_ref().unwrap();
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if spec.node_name.is_none() || matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let name = p.metadata.name.clone().unwrap_or_default();
        let prefix = name.split('-').next().unwrap_or_default().to_owned();
        let cpu: f64 = spec.containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("cpu"))
            .map_or(0.0, |q| q.0.parse().unwrap_or(0.0));
        *out.entry(prefix).or_default() += cpu;
    }
    out
}

/// UIDs of the pods of `pods`.
async fn uids(pods: &Api<Pod>) -> Vec<String> {
    let list = pods.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect()
}

/// The kind of object each `Reclaimed` Event in `ns` is about.
async fn reclaimed_about(ns: &TestNamespace) -> Vec<String> {
    ns.api::<k8s_openapi::api::events::v1::Event>()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Reclaimed"))
        .map(|e| e.regarding.and_then(|r| r.kind).unwrap_or_default())
        .collect()
}

/// Names of `ns`'s pods starting with `prefix` that are bound.
pub async fn bound(pods: &Api<Pod>, prefix: &str) -> usize {
    crate::support::bound_with_prefix(pods, prefix).await.len()
}

/// The message of the PodGroup's `Admitted` condition when it is False.
pub async fn not_admitted_because(groups: &Api<PodGroup>, name: &str) -> Option<String> {
    Some(not_admitted(groups, name).await?.1)
}

/// `(reason, message)` of the PodGroup's `Admitted` condition when it is False.
pub async fn not_admitted(groups: &Api<PodGroup>, name: &str) -> Option<(String, String)> {
    let status = groups.get(name).await.ok()?.status?;
    let admitted = status
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Admitted")?;
    (admitted.status == "False").then_some((admitted.reason, admitted.message))
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn two_queues_weighted_two_to_one_share_a_full_cluster_two_to_one_over_time() {
    let cluster = Cluster::connect().await;
    let (heavy, light) = weighted_two_to_one(&cluster.client, "fair").await;
    let ns = cluster.namespace("queues-fair").await;
    let pods = ns.api::<Pod>();
    // Plain pods fill the cluster while the gangs are created, so that admission starts from
    // nothing with both queues full of work instead of the first queue created taking all.
    for i in 0..4 {
        pods.create(
            &PostParams::default(),
            &pod(json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("filler-{i}")},
                "spec": {"containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "32"}}}]}
            })),
        )
        .await
        .unwrap();
    }
    for i in 0..4 {
        running(&pods, &format!("filler-{i}"), 60).await;
    }
    // Gangs of 2 pods of 2 CPUs finishing 16 to 24 s after they start (spread, so that gangs
    // started together do not all finish together): 32 fit at once, so the 2:1 split is
    // fine-grained (about 21 to 11). More than fits over the whole test.
    let gangs: Vec<(&str, String, String)> = (0..80)
        .map(|i| {
            (
                heavy.as_str(),
                format!("a{i:03}"),
                format!("{}s", 16 + i % 9),
            )
        })
        .chain((0..45).map(|i| {
            (
                light.as_str(),
                format!("b{i:03}"),
                format!("{}s", 16 + i % 9),
            )
        }))
        .collect();
    futures::stream::iter(gangs.iter())
        .for_each_concurrent(8, |(queue, name, run_for)| {
            create_gang(&ns, queue, name, 2, 2, Some(run_for), None)
        })
        .await;
    for i in 0..4 {
        pods.delete(
            &format!("filler-{i}"),
            &DeleteParams::default().grace_period(0),
        )
        .await
        .unwrap();
    }

    eventually(
        "the queues' gangs running on 90% of the 128 CPUs",
        60,
        || async {
            let cpu = running_cpu_by_prefix(&pods).await;
            let running: f64 = cpu
                .iter()
                .filter(|(k, _)| k != &"filler")
                .map(|(_, v)| v)
                .sum();
            (running >= 0.9 * 128.0).then_some(())
        },
    )
    .await;
    let mut samples = Vec::new();
    for _ in 0..7 {
        let cpu = running_cpu_by_prefix(&pods).await;
        let (a, b) = (
            cpu.iter()
                .filter(|(k, _)| k.starts_with('a'))
                .map(|(_, v)| v)
                .sum::<f64>(),
            cpu.iter()
                .filter(|(k, _)| k.starts_with('b'))
                .map(|(_, v)| v)
                .sum::<f64>(),
        );
        samples.push((a, b));
        tokio::time::sleep(Duration::from_secs(7)).await;
    }
    eprintln!("running CPUs (weight 2, weight 1) every 7 s: {samples:?}");
    // Samples taken while a wave of one queue's gangs finishes and the next is placed show a
    // cluster part-empty and lopsided for a few seconds (admission, scheduling and binding of
    // the refill); judge the ones where at least 90% of the 128 CPUs run the queues' gangs.
    let full: Vec<f64> = samples
        .iter()
        .filter(|(a, b)| a + b >= 0.9 * 128.0)
        .map(|(a, b)| a / (a + b))
        .collect();
    assert!(
        full.len() >= 3,
        "too few samples of a full cluster: {samples:?}"
    );
    for share in &full {
        assert!(
            (share - 2.0 / 3.0).abs() <= 0.1 * 2.0 / 3.0,
            "the weight-2 queue's part of the running CPUs strays more than 10% from 2/3: {samples:?}"
        );
    }
    ns.delete().await;
    delete_queue(&cluster.client, &heavy).await;
    delete_queue(&cluster.client, &light).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn capability_caps_a_queue_on_an_idle_cluster() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "capped", cpu_cap("8")).await;
    let ns = cluster.namespace("queues-capped").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    for name in ["c0", "c1", "c2"] {
        create_gang(&ns, &queue, name, 2, 2, None, None).await;
    }
    eventually("two gangs (8 CPUs) bound", 30, || async {
        (bound(&pods, "c").await == 4).then_some(())
    })
    .await;
    // Until the controller's first pass after admission's, a gang's status may still say it
    // is about to be released.
    let why = eventually("the third gang to say why it waits", 30, || async {
        for name in ["c0", "c1", "c2"] {
            if let Some(why) = not_admitted_because(&groups, name).await
                && why.starts_with("queue ")
            {
                return Some(why);
            }
        }
        None
    })
    .await;
    assert!(
        why.starts_with(&format!(
            "queue {queue} has reached its capability: cpu 8 held + 4 requested > capability 8"
        )),
        "{why}"
    );
    holds_for(
        8,
        "the queue within its capability (4 pods bound)",
        async || bound(&pods, "c").await == 4,
    )
    .await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_high_priority_group_in_a_full_queue_runs_before_older_low_priority_ones() {
    let cluster = Cluster::connect().await;
    high_priority_class(&cluster.client).await;
    // Room for one gang of 2 x 2 CPUs at a time.
    let queue = create_queue(&cluster.client, "prio", cpu_cap("4")).await;
    let ns = cluster.namespace("queues-prio").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    create_gang(&ns, &queue, "low0", 2, 2, Some("10s"), None).await;
    eventually("the first low-priority gang bound", 30, || async {
        (bound(&pods, "low0").await == 2).then_some(())
    })
    .await;
    for name in ["low1", "low2"] {
        create_gang(&ns, &queue, name, 2, 2, Some("10s"), None).await;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create_gang(
        &ns,
        &queue,
        "high",
        2,
        2,
        Some("10s"),
        Some("gangplank-e2e-high"),
    )
    .await;
    eventually("the high-priority gang bound", 60, || async {
        (bound(&pods, "high").await == 2).then_some(())
    })
    .await;
    assert_eq!(
        bound(&pods, "low1").await + bound(&pods, "low2").await,
        0,
        "an older low-priority gang went first"
    );
    // A status change stands two seconds before it is written.
    let why = eventually("low1's status to say why it waits", 20, || async {
        not_admitted_because(&groups, "low1").await
    })
    .await;
    assert!(why.contains("has reached its capability"), "{why}");
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn an_idle_queues_guarantee_stays_free_for_its_first_job() {
    let cluster = Cluster::connect().await;
    let guaranteed = create_queue(
        &cluster.client,
        "guaranteed",
        QueueSpec {
            guarantee: [("cpu".to_string(), Quantity("32".to_string()))].into(),
            ..QueueSpec::default()
        },
    )
    .await;
    let _guard = QueueGuard(guaranteed.clone());
    let busy = create_queue(&cluster.client, "busy", QueueSpec::default()).await;
    let ns = cluster.namespace("queues-guarantee").await;
    let pods = ns.api::<Pod>();
    // The busy queue asks for the whole cluster (128 CPUs), in gangs that run until deleted.
    for i in 0..8 {
        create_gang(&ns, &busy, &format!("busy{i}"), 2, 8, None, None).await;
    }
    eventually("the busy queue running 96 CPUs", 60, || async {
        (bound(&pods, "busy").await == 12).then_some(())
    })
    .await;
    holds_for(
        5,
        "the idle queue's guarantee free (busy holds 12 pods)",
        async || bound(&pods, "busy").await == 12,
    )
    .await;
    // A guarantee is room in all, not on particular nodes: members of 8 CPUs fit whatever
    // nodes the busy queue's 8-CPU pods left room on.
    let started = tokio::time::Instant::now();
    create_gang(&ns, &guaranteed, "first", 4, 8, None, None).await;
    eventually("the guaranteed queue's first job bound", 30, || async {
        (bound(&pods, "first").await == 4).then_some(())
    })
    .await;
    eprintln!(
        "the guaranteed queue's first job ran {:.1} s after it was created",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        bound(&pods, "busy").await,
        12,
        "nothing was evicted for it: the room was held"
    );
    ns.delete().await;
    delete_queue(&cluster.client, &guaranteed).await;
    delete_queue(&cluster.client, &busy).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_group_waiting_past_its_max_wait_goes_before_the_fair_share_order() {
    let cluster = Cluster::connect().await;
    // Y holds 96 of the 128 CPUs in gangs that run until deleted and that reclaim may not take.
    // Its pods take 16 CPUs each, so however the scheduler spreads them over the four nodes of
    // 32, the 32 CPUs left are two 16-CPU holes that x0's members fit (8-CPU pods spread three
    // to a node left 8 free on each, and x0 never bound).
    let y = create_queue(
        &cluster.client,
        "sla-y",
        QueueSpec {
            reclaimable: false,
            ..QueueSpec::default()
        },
    )
    .await;
    let x = create_queue(&cluster.client, "sla-x", QueueSpec::default()).await;
    let ns = cluster.namespace("queues-sla").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    for i in 0..3 {
        create_gang(&ns, &y, &format!("y{i}"), 2, 16, None, None).await;
    }
    eventually("queue y's 96 CPUs bound", 60, || async {
        (bound(&pods, "y").await == 6).then_some(())
    })
    .await;
    // X, below its share, takes the last 32 CPUs for 15 s.
    create_gang(&ns, &x, "x0", 2, 16, Some("15s"), None).await;
    eventually("x0 bound", 30, || async {
        (bound(&pods, "x0").await == 2).then_some(())
    })
    .await;
    // Then a group of Y bounded to 3 s of waiting, and more of X, which the fair-share order
    // puts first (X is below its share, Y above).
    let mut late = pod_group("late", 2, None);
    late.spec.queue = Some(y.clone());
    late.spec.max_wait_seconds = Some(3);
    groups.create(&PostParams::default(), &late).await.unwrap();
    for i in 0..2 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("late-{i}"), Some("late"), 8, json!({})),
        )
        .await
        .unwrap();
    }
    for i in 1..3 {
        create_gang(&ns, &x, &format!("x{i}"), 2, 16, Some("15s"), None).await;
    }
    let why = eventually("the late group overdue and first in line", 30, || async {
        let (reason, message) = not_admitted(&groups, "late").await?;
        (reason == "OverdueReserved").then_some(message)
    })
    .await;
    assert!(why.contains("over its maxWaitSeconds 3"), "{why}");
    eventually("the late group bound when x0's room frees", 40, || async {
        (bound(&pods, "late").await == 2).then_some(())
    })
    .await;
    assert_eq!(
        bound(&pods, "x1").await + bound(&pods, "x2").await,
        0,
        "a group of the queue below its share went before the overdue one"
    );
    ns.delete().await;
    delete_queue(&cluster.client, &x).await;
    delete_queue(&cluster.client, &y).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn with_namespace_fair_share_a_namespace_holding_less_of_the_queue_goes_first() {
    let cluster = Cluster::connect().await;
    // Room in the queue for two gangs of 2 x 2 CPUs.
    let queue = create_queue(
        &cluster.client,
        "by-namespace",
        QueueSpec {
            namespace_fair_share: true,
            ..cpu_cap("8")
        },
    )
    .await;
    let a = cluster.namespace("queues-ns-a").await;
    let b = cluster.namespace("queues-ns-b").await;
    // Namespace a fills the queue: a0 for good, a9 for 8 s.
    create_gang(&a, &queue, "a0", 2, 2, None, None).await;
    create_gang(&a, &queue, "a9", 2, 2, Some("8s"), None).await;
    eventually("a0 and a9 bound", 30, || async {
        (bound(&a.api::<Pod>(), "a").await == 4).then_some(())
    })
    .await;
    // Both wait for a9's room: a1 is older, b1's namespace holds less of the queue.
    create_gang(&a, &queue, "a1", 2, 2, None, None).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    create_gang(&b, &queue, "b1", 2, 2, None, None).await;
    eventually("b1 bound once a9 is done", 30, || async {
        (bound(&b.api::<Pod>(), "b1").await == 2).then_some(())
    })
    .await;
    holds_for(
        2,
        "a1 waiting: b1, of the namespace holding less, went first",
        async || bound(&a.api::<Pod>(), "a1").await == 0,
    )
    .await;
    a.delete().await;
    b.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

/// The PriorityClass `gangplank-e2e-high` (value 1000), created once for all tests.
pub async fn high_priority_class(client: &Client) {
    let classes: Api<PriorityClass> = Api::all(client.clone());
    let class: PriorityClass = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "gangplank-e2e-high"}, "value": 1000
    }))
    .unwrap();
    if let Err(e) = classes.create(&PostParams::default(), &class).await {
        assert!(
            matches!(&e, kube::Error::Api(s) if s.is_already_exists()),
            "{e}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_high_priority_group_preempts_a_lower_priority_gang_of_its_full_queue_whole() {
    let cluster = Cluster::connect().await;
    high_priority_class(&cluster.client).await;
    // Room in the queue for one gang of 2 x 2 CPUs; the cluster has plenty more.
    let queue = create_queue(&cluster.client, "preempt", cpu_cap("4")).await;
    let ns = cluster.namespace("queues-preempt").await;
    let pods = ns.api::<Pod>();
    let evictions = |m: &crate::support::Metrics| {
        m.sum(
            "gangplank_preemption_evictions_total",
            &[("queue", queue.as_str()), ("outcome", "ok")],
        )
    };
    let before = evictions(&cluster.gangplank_metrics().await);
    // Runs until deleted.
    create_gang(&ns, &queue, "low", 2, 2, None, None).await;
    eventually("the low-priority gang bound", 30, || async {
        (bound(&pods, "low").await == 2).then_some(())
    })
    .await;
    let low = uids(&pods).await;

    let started = tokio::time::Instant::now();
    create_gang(&ns, &queue, "high", 2, 2, None, Some("gangplank-e2e-high")).await;
    eventually("the high-priority gang bound", 60, || async {
        (bound(&pods, "high").await == 2).then_some(())
    })
    .await;
    eprintln!(
        "the high-priority gang ran {:.1} s after it was created",
        started.elapsed().as_secs_f64()
    );
    let left = uids(&pods).await;
    assert!(
        low.iter().all(|uid| !left.contains(uid)),
        "the whole low-priority gang is evicted"
    );
    assert_eq!(
        evictions(&cluster.gangplank_metrics().await) - before,
        2.0,
        "one eviction per pod of the low-priority gang"
    );
    let on_low = events_about(&cluster.client, &ns.name, "low").await;
    let note = on_low
        .get("Preempted")
        .expect("a Preempted event on the victim");
    assert!(note.contains("of priority 0 to make room for"), "{note}");
    let on_high = events_about(&cluster.client, &ns.name, "high").await;
    assert!(on_high.contains_key("Preempting"), "{on_high:?}");
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn an_elastic_gang_holding_its_queues_room_yields_five_members_to_a_gang_of_five_of_the_same_queue()
 {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "elastic-yield", QueueSpec::default()).await;
    let ns = cluster.namespace("queues-elastic-yield").await;
    let pods = ns.api::<Pod>();
    let evictions = |m: &crate::support::Metrics| {
        m.sum(
            "gangplank_preemption_evictions_total",
            &[("queue", queue.as_str()), ("outcome", "ok")],
        )
    };
    let before = evictions(&cluster.gangplank_metrics().await);
    // Three of the four 32-CPU nodes taken by pods outside Gangplank: 32 CPUs left.
    for i in 0..3 {
        let name = format!("filler-{i}");
        pods.create(
            &PostParams::default(),
            &pod(json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "32"}}}]}
            })),
        )
        .await
        .unwrap();
        running(&pods, &name, 60).await;
    }
    // The example in CPUs: gang a (minMember 5, maxMember 10) of 3-CPU members holds
    // 30 of the 32.
    let mut elastic = pod_group("a", 5, Some(10));
    elastic.spec.queue = Some(queue.clone());
    ns.api::<PodGroup>()
        .create(&PostParams::default(), &elastic)
        .await
        .unwrap();
    for i in 0..10 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("a-{i}"), Some("a"), 3, json!({})),
        )
        .await
        .unwrap();
    }
    eventually("all ten members of a bound", 60, || async {
        (bound(&pods, "a-").await == 10).then_some(())
    })
    .await;
    let a_before = uids(&pods).await;

    // b, of the same queue and priority, needs five members of 3 CPUs: 15 CPUs, 2 free.
    let started = tokio::time::Instant::now();
    create_gang(&ns, &queue, "b", 5, 3, None, None).await;
    eventually("b's five members bound", 60, || async {
        (bound(&pods, "b-").await == 5).then_some(())
    })
    .await;
    eprintln!(
        "b ran {:.1} s after it was created",
        started.elapsed().as_secs_f64()
    );
    holds_for(5, "a keeping its minimum of five running", async || {
        bound(&pods, "a-").await == 5
    })
    .await;
    let left = uids(&pods).await;
    let gone = a_before.iter().filter(|uid| !left.contains(uid)).count();
    assert_eq!(gone, 5, "five of a's elastic members evicted, no more");
    assert_eq!(
        evictions(&cluster.gangplank_metrics().await) - before,
        5.0,
        "one eviction per elastic member, counted as preemption inside the queue"
    );
    let on_a = events_about(&cluster.client, &ns.name, "a").await;
    let note = on_a.get("Preempted").expect("a Preempted event on a");
    assert!(
        note.contains("evicted its elastic members beyond minMember")
            && note.contains(&format!("gang {}/b", ns.name))
            && note.contains("elastic members yield to any gang's minimum"),
        "{note}"
    );
    let on_b = events_about(&cluster.client, &ns.name, "b").await;
    let note = on_b.get("Preempting").expect("a Preempting event on b");
    assert!(
        note.contains(&format!("elastic members of gang {}/a", ns.name)),
        "{note}"
    );

    // a's owner would make its members again: they wait at the gate, and b keeps running.
    for i in 10..15 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("a-{i}"), Some("a"), 3, json!({})),
        )
        .await
        .unwrap();
    }
    holds_for(
        5,
        "b keeping its five, a's new members waiting",
        async || bound(&pods, "b-").await == 5 && bound(&pods, "a-").await == 5,
    )
    .await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_queue_below_its_share_reclaims_whole_gangs_from_a_borrower_within_a_minute() {
    let cluster = Cluster::connect().await;
    let lender = create_queue(&cluster.client, "reclaim-a", QueueSpec::default()).await;
    let claimant = create_queue(&cluster.client, "reclaim-b", QueueSpec::default()).await;
    let ns = cluster.namespace("queues-reclaim").await;
    let pods = ns.api::<Pod>();
    let cpu_of = |cpu: &BTreeMap<String, f64>, queue: char| -> f64 {
        cpu.iter()
            .filter(|(k, _)| k.starts_with(queue))
            .map(|(_, v)| v)
            .sum()
    };
    let evictions = |m: &crate::support::Metrics| {
        m.sum(
            "gangplank_reclaim_evictions_total",
            &[("queue", lender.as_str()), ("outcome", "ok")],
        )
    };
    let before = evictions(&cluster.gangplank_metrics().await);

    // Queue a borrows the whole cluster (4 nodes of 32 CPUs): 8 gangs of 2 x 8 CPUs that run
    // until deleted.
    for i in 0..8 {
        create_gang(&ns, &lender, &format!("a{i}"), 2, 8, None, None).await;
    }
    eventually("queue a's 16 pods bound", 60, || async {
        (bound(&pods, "a").await == 16).then_some(())
    })
    .await;
    let lent = uids(&pods).await;

    // Queue b, of the same weight, asks for as much: it deserves half, 64 CPUs.
    let started = tokio::time::Instant::now();
    for i in 0..8 {
        create_gang(&ns, &claimant, &format!("b{i}"), 2, 8, None, None).await;
    }
    eventually("queue b to run its deserved 64 CPUs", 60, || async {
        let cpu = running_cpu_by_prefix(&pods).await;
        (cpu_of(&cpu, 'b') >= 64.0).then_some(())
    })
    .await;
    eprintln!(
        "queue b ran its deserved share {:.1} s after its first gang was created",
        started.elapsed().as_secs_f64()
    );

    // Once the evicted pods are gone, queue a keeps its own share, and nothing else happens.
    eventually("the evicted pods gone", 60, || async {
        let left = uids(&pods).await;
        (lent.iter().filter(|uid| !left.contains(uid)).count() >= 8).then_some(())
    })
    .await;
    holds_for(5, "queue a keeping its own share", async || {
        cpu_of(&running_cpu_by_prefix(&pods).await, 'a') >= 64.0
    })
    .await;
    let cpu = running_cpu_by_prefix(&pods).await;
    assert!(
        cpu_of(&cpu, 'b') <= 64.0,
        "queue b took more than its share: {cpu:?}"
    );
    for (gang, held) in cpu.iter().filter(|(k, _)| k.starts_with('a')) {
        assert!(
            *held == 16.0,
            "gang {gang} of queue a left with {held} of its 16 CPUs: {cpu:?}"
        );
    }
    let left = uids(&pods).await;
    let gone = lent.iter().filter(|uid| !left.contains(uid)).count();
    assert_eq!(gone, 8, "four whole gangs of a evicted, no more");
    assert_eq!(
        evictions(&cluster.gangplank_metrics().await) - before,
        gone as f64,
        "one eviction per evicted pod, none twice"
    );
    let reclaimed = reclaimed_about(&ns).await;
    assert_eq!(reclaimed.len(), 4, "one Reclaimed event per victim gang");
    ns.delete().await;
    delete_queue(&cluster.client, &lender).await;
    delete_queue(&cluster.client, &claimant).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn reclaim_takes_pods_of_a_borrowing_queue_that_are_in_no_group_one_by_one() {
    let cluster = Cluster::connect().await;
    let lender = create_queue(&cluster.client, "lone-a", QueueSpec::default()).await;
    let claimant = create_queue(&cluster.client, "lone-b", QueueSpec::default()).await;
    let _guards = (QueueGuard(lender.clone()), QueueGuard(claimant.clone()));
    let ns = cluster.namespace("queues-reclaim-lone").await;
    let pods = ns.api::<Pod>();
    // Queue a borrows the whole cluster with 8 pods of 16 CPUs in no group.
    for i in 0..8 {
        let extra = json!({"labels": {"scheduling.gangplank.dev/queue": lender}});
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("a{i}-0"), None, 16, extra),
        )
        .await
        .unwrap_or_else(|e| panic!("failed to create pod a{i}-0: {e}"));
    }
    eventually("queue a's 8 pods bound", 60, || async {
        (bound(&pods, "a").await == 8).then_some(())
    })
    .await;
    let lent = uids(&pods).await;

    // Queue b, of the same weight, asks for its deserved half in two gangs of 2 x 16 CPUs.
    for i in 0..2 {
        create_gang(&ns, &claimant, &format!("b{i}"), 2, 16, None, None).await;
    }
    eventually("queue b to run its deserved 64 CPUs", 60, || async {
        (bound(&pods, "b").await == 4).then_some(())
    })
    .await;
    eventually("queue a's evicted pods gone", 60, || async {
        (bound(&pods, "a").await == 4).then_some(())
    })
    .await;
    holds_for(5, "queue a keeping its own share of 4 pods", async || {
        bound(&pods, "a").await == 4
    })
    .await;
    let left = uids(&pods).await;
    let gone = lent.iter().filter(|uid| !left.contains(uid)).count();
    assert_eq!(gone, 4, "four pods of a evicted, no more");
    let reclaimed = reclaimed_about(&ns).await;
    assert_eq!(
        reclaimed,
        vec!["Pod"; 4],
        "one Reclaimed event on each evicted pod"
    );
    ns.delete().await;
    delete_queue(&cluster.client, &lender).await;
    delete_queue(&cluster.client, &claimant).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn pods_in_no_group_of_two_queues_weighted_two_to_one_converge_to_two_to_one() {
    let cluster = Cluster::connect().await;
    let (heavy, light) = weighted_two_to_one(&cluster.client, "lone").await;
    let _guards = (QueueGuard(heavy.clone()), QueueGuard(light.clone()));
    let ns = cluster.namespace("queues-lone-converge").await;
    let pods = ns.api::<Pod>();
    let create = |queue: &str, name: String| {
        let pod = managed_pod(
            &name,
            None,
            4,
            json!({"labels": {"scheduling.gangplank.dev/queue": queue}}),
        );
        let pods = pods.clone();
        async move {
            pods.create(&PostParams::default(), &pod)
                .await
                .unwrap_or_else(|e| panic!("failed to create pod {name}: {e}"))
        }
    };
    // The cluster fills half and half (16 pods of 4 CPUs each) while each queue asks for
    // exactly what it holds, so nothing is reclaimed yet and nothing finishes later.
    for i in 0..16 {
        create(&heavy, format!("a{i:02}")).await;
        create(&light, format!("b{i:02}")).await;
    }
    eventually("the cluster full, half and half", 90, || async {
        (bound(&pods, "a").await == 16 && bound(&pods, "b").await == 16).then_some(())
    })
    .await;
    // Then both ask for twice as much: the weight-2 queue deserves 85.3 CPUs, the other 42.7.
    for i in 16..32 {
        create(&heavy, format!("a{i:02}")).await;
        create(&light, format!("b{i:02}")).await;
    }
    let split = eventually("a 2:1 split within 10%", 120, || async {
        let cpu = running_cpu_by_prefix(&pods).await;
        let of = |queue: char| {
            cpu.iter()
                .filter(|(k, _)| k.starts_with(queue))
                .map(|(_, v)| v)
                .sum::<f64>()
        };
        let (a, b) = (of('a'), of('b'));
        let share = a / (a + b);
        ((share - 2.0 / 3.0).abs() <= 0.1 * 2.0 / 3.0 && a + b >= 0.9 * 128.0).then_some((a, b))
    })
    .await;
    eprintln!("running CPUs (weight 2, weight 1): {split:?}");

    // A pod of the light queue still gated says why it waits, with the numbers.
    let waiting = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| {
            p.metadata.name.as_deref().unwrap_or("").starts_with('b')
                && p.spec.as_ref().unwrap().scheduling_gates.is_some()
        })
        .and_then(|p| p.metadata.name)
        .expect("a pod of the light queue still waits");
    let note = eventually(
        "a WaitingForAdmission Event on a waiting pod",
        60,
        || async {
            events_about(&cluster.client, &ns.name, &waiting)
                .await
                .remove("WaitingForAdmission")
        },
    )
    .await;
    assert!(note.contains("cpu"), "{note}");

    // Each Queue's status counts its pods in no group.
    let queues = Api::<Queue>::all(cluster.client.clone());
    eventually("queue statuses counting pods in no group", 60, || async {
        let status = queues.get(&light).await.ok()?.status?;
        (status.running > 0 && status.pending > 0).then_some(())
    })
    .await;
    ns.delete().await;
    delete_queue(&cluster.client, &heavy).await;
    delete_queue(&cluster.client, &light).await;
}

/// CPUs that bound pods of `ns` hold, by the first letter of their name.
async fn running_cpu_by_letter(pods: &Api<Pod>) -> BTreeMap<char, f64> {
    let mut out = BTreeMap::new();
    for (prefix, cpu) in running_cpu_by_prefix(pods).await {
        *out.entry(prefix.chars().next().unwrap_or('?')).or_default() += cpu;
    }
    out
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn three_queues_of_gangs_arriving_one_after_another_on_a_full_cluster_converge_to_their_weights()
 {
    let cluster = Cluster::connect().await;
    let weighted = |weight| QueueSpec {
        weight,
        ..QueueSpec::default()
    };
    let x = create_queue(&cluster.client, "arrive-x", weighted(1)).await;
    let y = create_queue(&cluster.client, "arrive-y", weighted(1)).await;
    let z = create_queue(&cluster.client, "arrive-z", weighted(2)).await;
    let _guards = (
        QueueGuard(x.clone()),
        QueueGuard(y.clone()),
        QueueGuard(z.clone()),
    );
    let ns = cluster.namespace("queues-arrive").await;
    let pods = ns.api::<Pod>();
    // Gangs of 2 pods of 4 CPUs that never finish; each queue asks for the whole cluster.
    let gangs = |queue: &str, letter: char| {
        let names: Vec<String> = (0..16).map(|i| format!("{letter}{i:02}")).collect();
        let (ns, queue) = (&ns, queue.to_owned());
        async move {
            futures::stream::iter(names.iter())
                .for_each_concurrent(4, |name| create_gang(ns, &queue, name, 2, 4, None, None))
                .await
        }
    };
    gangs(&x, 'x').await;
    eventually("queue x filling the cluster", 90, || async {
        (running_cpu_by_letter(&pods).await.get(&'x') == Some(&128.0)).then_some(())
    })
    .await;
    gangs(&y, 'y').await;
    eventually("queues x and y sharing the cluster 1:1", 120, || async {
        let cpu = running_cpu_by_letter(&pods).await;
        let (x, y) = (cpu.get(&'x')?, cpu.get(&'y')?);
        ((x - 64.0).abs() <= 6.4 && (y - 64.0).abs() <= 6.4).then_some(())
    })
    .await;
    gangs(&z, 'z').await;
    let split = eventually(
        "queues x, y and z sharing the cluster 1:1:2",
        120,
        || async {
            let cpu = running_cpu_by_letter(&pods).await;
            let (x, y, z) = (cpu.get(&'x')?, cpu.get(&'y')?, cpu.get(&'z')?);
            let near = |got: f64, want: f64| (got - want).abs() <= 0.1 * want;
            (near(*x, 32.0) && near(*y, 32.0) && near(*z, 64.0)).then_some((*x, *y, *z))
        },
    )
    .await;
    eprintln!("running CPUs of x, y, z (weights 1, 1, 2): {split:?}");
    ns.delete().await;
    for queue in [&x, &y, &z] {
        delete_queue(&cluster.client, queue).await;
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn reclaim_leaves_a_gang_that_a_pod_disruption_budget_protects_whole_and_takes_another() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;

    let cluster = Cluster::connect().await;
    let lender = create_queue(&cluster.client, "pdb-a", QueueSpec::default()).await;
    let claimant = create_queue(&cluster.client, "pdb-b", QueueSpec::default()).await;
    let ns = cluster.namespace("queues-reclaim-pdb").await;
    let pods = ns.api::<Pod>();
    // Queue a fills the 4 x 32 CPUs with 4 gangs of 2 x 16; a budget forbids disrupting any
    // pod of three of them, so only a2 may go.
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep"},
        "spec": {"maxUnavailable": 0, "selector": {"matchExpressions": [{
            "key": "scheduling.gangplank.dev/pod-group", "operator": "In",
            "values": ["a0", "a1", "a3"]}]}}
    }))
    .unwrap();
    ns.api::<PodDisruptionBudget>()
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    // a2 is the oldest: reclaim tries the younger, protected gangs first, and is refused.
    create_gang(&ns, &lender, "a2", 2, 16, None, None).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    for i in [0, 1, 3] {
        create_gang(&ns, &lender, &format!("a{i}"), 2, 16, None, None).await;
    }
    eventually("queue a's 8 pods bound", 60, || async {
        (bound(&pods, "a").await == 8).then_some(())
    })
    .await;
    eventually("the budget to count 6 healthy pods", 60, || async {
        let pdb = ns.api::<PodDisruptionBudget>().get("keep").await.ok()?;
        (pdb.status?.current_healthy == Some(6)).then_some(())
    })
    .await;

    create_gang(&ns, &claimant, "b0", 2, 16, None, None).await;
    eventually("queue b's gang to run", 60, || async {
        (bound(&pods, "b0").await == 2).then_some(())
    })
    .await;
    let expected: BTreeMap<String, f64> = [("a0", 32.0), ("a1", 32.0), ("a3", 32.0), ("b0", 32.0)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    // Only a2, the gang no budget protects, is evicted: once it is gone, the rest stays.
    eventually("a2's pods gone", 60, || async {
        (running_cpu_by_prefix(&pods).await == expected).then_some(())
    })
    .await;
    holds_for(3, "only a2 evicted", async || {
        running_cpu_by_prefix(&pods).await == expected
    })
    .await;
    let metrics = cluster.gangplank_metrics().await;
    let refused = metrics.sum(
        "gangplank_reclaim_evictions_total",
        &[("queue", lender.as_str()), ("outcome", "refused")],
    );
    assert!(refused >= 1.0, "the budget refused at least one gang first");
    ns.delete().await;
    delete_queue(&cluster.client, &lender).await;
    delete_queue(&cluster.client, &claimant).await;
}

/// Small jobs of the backfill test: more than fit beside the large gang's reservation.
const SMALL_JOBS: usize = 12;

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn small_jobs_backfill_around_a_waiting_large_gang_without_delaying_it() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "backfill", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("queues-backfill").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    // A filler of 20 s, whose runtime admission does not know.
    large_gang_heads_the_line_behind_a_filler(&ns, &queue, 20, false).await;
    // Small jobs that run for a minute, younger than the large gang: the four that fit beside
    // its reservation run now; the rest would fit in the reserved room and wait behind it.
    // Every other one is a pod of the queue in no group, which the extender must keep out of
    // the reservation too (the scheduler alone would as soon put it on a reserved node).
    for i in 0..SMALL_JOBS {
        let name = format!("small{i:02}");
        if i % 2 == 0 {
            create_gang(&ns, &queue, &name, 1, 4, Some("60s"), None).await;
            continue;
        }
        let extra = json!({
            "labels": {"scheduling.gangplank.dev/queue": queue},
            "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "60s"},
        });
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("{name}-0"), None, 4, extra),
        )
        .await
        .unwrap_or_else(|e| panic!("failed to create pod {name}-0: {e}"));
    }
    eventually(
        "small jobs running beside the waiting large gang",
        30,
        || async {
            (bound(&pods, "small").await == 4 && bound(&pods, "big").await == 0).then_some(())
        },
    )
    .await;
    let why = eventually("a small job held back by the reservation", 30, || async {
        for i in 0..SMALL_JOBS {
            if let Some((reason, message)) = not_admitted(&groups, &format!("small{i:02}")).await
                && reason == "BehindReservation"
            {
                return Some(message);
            }
        }
        None
    })
    .await;
    assert!(why.starts_with("behind a reservation for "), "{why}");
    // Had the small jobs taken the room the filler leaves, the large gang would wait a minute
    // more for them; it starts as soon as the filler is done.
    eventually("the filler to finish", 60, || async {
        (bound(&pods, "fill").await == 0 || finished(&pods, "fill").await == 4).then_some(())
    })
    .await;
    eventually(
        "the large gang bound within 20 s of the filler finishing",
        20,
        || async { (bound(&pods, "big").await == 2).then_some(()) },
    )
    .await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_short_job_runs_in_a_waiting_gangs_reservation_when_it_ends_before_that_gang_could_start()
{
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "lend", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("queues-lend").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    // A filler of 40 s, as its PodGroup says.
    large_gang_heads_the_line_behind_a_filler(&ns, &queue, 40, true).await;
    // The 8 CPUs left on the two nodes big does not hold, taken for longer than the filler.
    create_gang(&ns, &queue, "side", 2, 8, Some("90s"), None).await;
    eventually("jobs beside the reservation running", 30, || async {
        (bound(&pods, "side").await == 2).then_some(())
    })
    .await;
    // 5 s ends well before the filler's 40 s; 90 s does not.
    create_gang(&ns, &queue, "quick", 1, 4, Some("5s"), None).await;
    expect_runtime(&groups, "quick", 5).await;
    create_gang(&ns, &queue, "slow", 1, 4, Some("90s"), None).await;
    expect_runtime(&groups, "slow", 90).await;
    let note = eventually("the short job lent reserved room", 30, || async {
        let events = events_about(&cluster.client, &ns.name, "quick").await;
        events.get("Backfilled").cloned()
    })
    .await;
    let head = format!("reserved for {}/big", ns.name);
    assert!(note.contains(&head), "{note}");
    assert_eq!(
        bound(&pods, "big").await,
        0,
        "big still waits for the filler"
    );
    eventually(
        "the longer job waiting behind the reservation",
        30,
        || async {
            let (reason, _) = not_admitted(&groups, "slow").await?;
            (reason == "BehindReservation").then_some(())
        },
    )
    .await;
    eventually("the filler to finish", 60, || async {
        (finished(&pods, "fill").await == 4).then_some(())
    })
    .await;
    eventually(
        "the large gang bound within 20 s of the filler finishing",
        20,
        || async { (bound(&pods, "big").await == 2).then_some(()) },
    )
    .await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

/// Fills 24 of the 32 CPUs of each of the 4 nodes with gang `fill` for `seconds` (its
/// PodGroup's `expectedRuntimeSeconds` too when `declared`), then creates gang `big` of two
/// whole nodes: it waits for the filler, and heads the line holding the free room of two
/// nodes.
async fn large_gang_heads_the_line_behind_a_filler(
    ns: &TestNamespace,
    queue: &str,
    seconds: i32,
    declared: bool,
) {
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    create_gang(ns, queue, "fill", 4, 24, Some(&format!("{seconds}s")), None).await;
    if declared {
        expect_runtime(&groups, "fill", seconds).await;
    }
    eventually("the filler bound", 30, || async {
        (bound(&pods, "fill").await == 4).then_some(())
    })
    .await;
    create_gang(ns, queue, "big", 2, 32, None, None).await;
    eventually("the large gang heading the line", 30, || async {
        let (reason, _) = not_admitted(&groups, "big").await?;
        (reason == "Reserved").then_some(())
    })
    .await;
}

/// Sets the PodGroup's `expectedRuntimeSeconds`.
async fn expect_runtime(groups: &Api<PodGroup>, name: &str, seconds: i32) {
    let patch = json!({"spec": {"expectedRuntimeSeconds": seconds}});
    groups
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("failed to set {name}'s expected runtime: {e}"));
}

/// How many of `ns`'s pods starting with `prefix` have succeeded or failed.
async fn finished(pods: &Api<Pod>, prefix: &str) -> usize {
    let list = pods.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix))
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            matches!(phase, Some("Succeeded" | "Failed"))
        })
        .count()
}
