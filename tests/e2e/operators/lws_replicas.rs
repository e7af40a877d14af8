//! A LeaderWorkerSet (`sigs.k8s.io/lws` v0.9.0, no gang provider) as a gang of gangs: created
//! labelled with its queue and annotated `scheduling.gangplank.dev/min-replicas: "2"`, its
//! replicas (a leader and its workers each) are the instances of one gang; it starts at two
//! whole replicas, grows and yields a whole replica at a time, and LWS makes again a replica
//! that yielded, which waits whole. The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use gangplank::api::{PodGroup, QueueSpec, labels};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;

use super::lws::{Provider, create, leader_worker_set, lws_with, replicas};
use crate::queues::{QueueGuard, create_queue};
use crate::sub_groups::{filler, train_bound_whole};
use crate::support::{Cluster, eventually, holds_for};

/// Pods of each replica: a leader and two workers.
const SIZE: usize = 3;

/// The replicas with a pod bound, each as its bound pods, fewest first.
async fn bound_replicas(pods: &Api<Pod>) -> Vec<usize> {
    let mut bound: Vec<usize> = replicas(pods)
        .await
        .into_values()
        .filter(|r| r.bound > 0)
        .map(|r| r.bound)
        .collect();
    bound.sort_unstable();
    bound
}

/// Waits (`seconds` at most, saying `what`) until exactly `n` replicas are bound, each whole.
async fn whole_replicas_bound(pods: &Api<Pod>, n: usize, seconds: u64, what: &str) {
    eventually(what, seconds, || async {
        (bound_replicas(pods).await == vec![SIZE; n]).then_some(())
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_leader_worker_set_of_whole_replicas_starts_at_its_minimum_then_grows_and_yields_whole_replicas()
 {
    let cluster = &Cluster::connect().await;
    lws_with(cluster, Provider::None).await;
    let queue = create_queue(&cluster.client, "lws-replicas", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("lws-replicas").await;
    let (pods, groups) = (ns.api::<Pod>(), ns.api::<PodGroup>());
    // Two nodes of the four left: 64 CPUs, room for two replicas of 24 CPUs (three pods of 8)
    // and not a third.
    for name in ["filler-0", "filler-1"] {
        filler(&pods, name, 32).await;
    }
    let mut lws = leader_worker_set("svc", 4, SIZE as u32, 8, json!({}));
    lws.metadata.labels = Some([(labels::QUEUE_LABEL.to_owned(), queue.clone())].into());
    lws.metadata.annotations =
        Some([(labels::MIN_REPLICAS_ANNOTATION.to_owned(), "2".to_owned())].into());
    create(cluster, &ns.name, lws).await;

    whole_replicas_bound(&pods, 2, 120, "two replicas bound whole").await;
    let group = groups.get("svc").await.unwrap();
    assert_eq!(group.spec.min_member, 6, "{:?}", group.spec);
    assert_eq!(group.spec.queue.as_deref(), Some(queue.as_str()));
    holds_for(3, "no third replica bound, not even in part", async || {
        bound_replicas(&pods).await == vec![SIZE; 2]
    })
    .await;

    // Room grows by a node (48 CPUs free): the last two replicas start, each whole.
    pods.delete("filler-0", &Default::default()).await.unwrap();
    whole_replicas_bound(&pods, 4, 90, "every replica bound whole once a node frees").await;

    // A gang of the same queue needs 24 CPUs and none is free: a replica beyond the minimum
    // yields, whole; LWS makes it again and it waits, whole.
    train_bound_whole(&groups, &pods, Some(&queue)).await;
    eventually(
        "whole replicas only, at or above the minimum, fewer than four",
        60,
        || async {
            let bound = bound_replicas(&pods).await;
            let whole = bound.iter().all(|n| *n == SIZE);
            (whole && (2..4).contains(&bound.len())).then_some(())
        },
    )
    .await;
    ns.delete().await;
}
