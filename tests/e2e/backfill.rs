//! Backfill through a real API server: small jobs run around a large gang waiting at the head
//! of the line without delaying it, and a short job runs inside its reservation when it ends
//! before that gang could start. The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use gangplank::api::{PodGroup, QueueSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::queues::{QueueGuard, bound, create_gang, create_queue, delete_queue, not_admitted};
use crate::support::{Cluster, TestNamespace, events_about, eventually, managed_pod};

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
