//! Priority, preemption, reclaim and the elastic yield through a real API server: a group of
//! higher priority goes first and preempts lower-priority gangs of its queue whole, elastic
//! members yield to any gang's minimum, a queue below its share reclaims whole gangs (and
//! pods in no group, one by one) from a borrower, and a PodDisruptionBudget keeps a gang. The
//! cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use std::collections::BTreeMap;
use std::time::Duration;

use gangplank::api::{PodGroup, QueueSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

use crate::queues::{
    QueueGuard, bound, cpu_cap, create_gang, create_queue, delete_queue, not_admitted_because,
    running_cpu_by_prefix,
};
use crate::support::{
    Cluster, TestNamespace, events_about, eventually, holds_for, managed_pod, pod, pod_group,
    running,
};

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
