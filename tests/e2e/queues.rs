//! Queues through a real API server: fair share between weighted queues, capability as a hard
//! cap, guarantees held for idle queues, maxWaitSeconds and namespace fair share, and the
//! helpers the other queue tests share (priority, preemption and reclaim are in `reclaim`,
//! backfill in `backfill`, topology in `topology`). The cluster is `e2e/up`'s default: 4
//! nodes of 32 CPUs.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use gangplank::api::{PodGroup, Queue, QueueSpec};
use k8s_openapi::api::core::v1::Pod;
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

/// Sets `queue`'s CPU capability to `cpu`.
pub async fn cap_cpu(cluster: &crate::support::Cluster, queue: &str, cpu: &str) {
    Api::<gangplank::api::Queue>::all(cluster.client.clone())
        .patch(
            queue,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"capability": {"cpu": cpu}}})),
        )
        .await
        .unwrap();
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

/// Names of `ns`'s pods starting with `prefix` that are bound.
pub async fn bound(pods: &Api<Pod>, prefix: &str) -> usize {
    crate::support::bound_with_prefix(pods, prefix).await.len()
}

/// Waits until the PodGroup `name` says it is not admitted because `queue` has reached its
/// capability of `cpu` CPUs, and returns what it says.
pub async fn waits_at_capability(
    groups: &Api<PodGroup>,
    name: &str,
    queue: &str,
    cpu: &str,
) -> String {
    let what = format!("PodGroup {name} saying queue {queue} has reached its capability");
    let why = crate::support::eventually(&what, 90, || async {
        let (_, why) = not_admitted(groups, name).await?;
        why.starts_with(&format!("queue {queue} has reached its capability"))
            .then_some(why)
    })
    .await;
    assert!(why.contains(&format!("> capability {cpu}")), "{why}");
    why
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
