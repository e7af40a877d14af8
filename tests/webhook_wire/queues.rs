//! The Queue webhook: weights, guarantees against the cluster and the capability, parents,
//! closing and deleting a queue in use, and a queue that appears late.

use gangplank::api::composite_pod_group::NoRoot;
use gangplank::cache::lookup::TreeOf;
use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn a_queue_of_weight_zero_is_refused() {
    let queue = a_queue("q", json!({"weight": 0}), json!({}));
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        answer,
        golden("queue-weight-zero.response.json"),
        "the whole answer"
    );
}

#[tokio::test]
async fn a_guarantee_larger_than_the_cluster_is_refused_and_one_that_fits_is_admitted() {
    let huge = a_queue(
        "hog",
        json!({"guarantee": {"cpu": "1e18", "memory": "1Gi"}}),
        json!({}),
    );
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", huge)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.guarantee[cpu]: must not exceed what the cluster's schedulable nodes hold (128), got 1e18; a guarantee is room no other queue may use"
    );
    let fits = a_queue(
        "fits",
        json!({"guarantee": {"cpu": "128", "memory": "1Gi"}}),
        json!({}),
    );
    allowed_unchanged(&post(router(), VALIDATE_QUEUES, &create("queues", fits)).await);
}

#[tokio::test]
async fn a_guarantee_above_the_capability_is_refused_per_resource() {
    let queue = a_queue(
        "q",
        json!({"capability": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 4},
            "guarantee": {"cpu": "8000m", "memory": "65Gi", "nvidia.com/gpu": "4.5", "pods": "10"}}),
        json!({}),
    );
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.guarantee[memory]: must not exceed spec.capability[memory] (64Gi), got 65Gi; spec.guarantee[nvidia.com/gpu]: must not exceed spec.capability[nvidia.com/gpu] (4), got 4.5"
    );
}

#[tokio::test]
async fn a_parent_that_does_not_exist_or_is_the_queue_itself_is_refused() {
    let queue = a_queue("q", json!({"parent": "nope"}), json!({}));
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        denial(&answer, 404),
        "spec.parent: queue \"nope\" does not exist; name an existing queue (kubectl get queues) or leave spec.parent unset for a top-level queue"
    );
    let queue = a_queue("q", json!({"parent": "q"}), json!({}));
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.parent: a queue cannot be its own parent"
    );
}

#[tokio::test]
async fn a_parent_below_the_queue_is_refused_as_a_cycle() {
    let lookup = StaticLookup {
        queues: vec![
            queue_view("org", QueueState::Open, None),
            queue_view("team", QueueState::Open, Some("org")),
            queue_view("squad", QueueState::Open, Some("team")),
        ],
        ..cluster()
    };
    let old = a_queue("org", json!({}), json!({}));
    let new = a_queue("org", json!({"parent": "squad"}), json!({}));
    let answer = post(
        router_with(lookup, settings()),
        VALIDATE_QUEUES,
        &update("queues", old, new),
    )
    .await;
    assert_eq!(
        denial(&answer, 422),
        "spec.parent: \"squad\" would make a cycle of parents: org → squad → team → org; name a queue that is not below \"org\""
    );
}

#[tokio::test]
async fn a_queue_with_admitted_groups_cannot_be_closed_and_the_message_names_them() {
    let lookup = StaticLookup {
        pod_groups: vec![
            group_view("a", "research", PodGroupPhase::Running),
            group_view("b", "research", PodGroupPhase::Inqueue),
            group_view("c", "research", PodGroupPhase::Pending),
            group_view("d", "research", PodGroupPhase::Completed),
        ],
        ..cluster()
    };
    let old = a_queue("research", json!({"state": "Open"}), json!({}));
    let new = a_queue("research", json!({"state": "Closed"}), json!({}));
    let answer = post(
        router_with(lookup, settings()),
        VALIDATE_QUEUES,
        &update("queues", old, new),
    )
    .await;
    assert_eq!(
        denial(&answer, 403),
        "spec.state: cannot close queue \"research\" while it holds 2 admitted PodGroups (ml/a, ml/b); wait until they finish, then close it"
    );
}

#[tokio::test]
async fn a_queue_whose_status_counts_admitted_groups_cannot_be_closed() {
    let old = a_queue("research", json!({"state": "Open"}), json!({"running": 1}));
    let new = a_queue(
        "research",
        json!({"state": "Closed"}),
        json!({"running": 1}),
    );
    let answer = post(router(), VALIDATE_QUEUES, &update("queues", old, new)).await;
    assert_eq!(
        denial(&answer, 403),
        "spec.state: cannot close queue \"research\" while it holds 1 admitted PodGroup; wait until they finish, then close it"
    );
}

/// The answer to deleting queue `research` where `lookup` is what Gangplank sees.
async fn deleting_research(lookup: StaticLookup) -> Value {
    let queue = a_queue("research", json!({}), json!({}));
    post(
        router_with(lookup, settings()),
        VALIDATE_QUEUES,
        &review("queues", "DELETE", Value::Null, queue),
    )
    .await
}

#[tokio::test]
async fn a_queue_that_groups_use_cannot_be_deleted() {
    let lookup = StaticLookup {
        pod_groups: vec![
            group_view("a", "research", PodGroupPhase::Running),
            group_view("c", "research", PodGroupPhase::Pending),
        ],
        ..cluster()
    };
    assert_eq!(
        denial(&deleting_research(lookup).await, 403),
        "queue \"research\" cannot be deleted while PodGroups use it: 1 admitted PodGroup (ml/a) and 1 waiting (ml/c); wait until they finish, or move waiting groups to another queue (spec.queue), then delete it"
    );
}

#[tokio::test]
async fn a_queue_that_other_queues_name_as_parent_cannot_be_deleted() {
    let lookup = StaticLookup {
        queues: vec![
            queue_view("research", QueueState::Open, None),
            queue_view("vision", QueueState::Open, Some("research")),
            queue_view("nlp", QueueState::Open, Some("research")),
        ],
        ..cluster()
    };
    assert_eq!(
        denial(&deleting_research(lookup).await, 403),
        "queue \"research\" cannot be deleted while queues name it as their spec.parent: nlp, vision; give them another parent or none first, then delete it"
    );
}

#[tokio::test]
async fn an_unused_queue_can_be_closed_and_deleted() {
    let old = a_queue("research", json!({"state": "Open"}), json!({}));
    let new = a_queue("research", json!({"state": "Closed"}), json!({}));
    allowed_unchanged(
        &post(
            router(),
            VALIDATE_QUEUES,
            &update("queues", old.clone(), new),
        )
        .await,
    );
    allowed_unchanged(
        &post(
            router(),
            VALIDATE_QUEUES,
            &review("queues", "DELETE", Value::Null, old),
        )
        .await,
    );
}

// ---- lookups that catch up

/// Knows queue `fresh` only from the third lookup on, like a watch that delivers it late.
#[derive(Default)]
struct LateQueue(AtomicUsize);

impl QueueLookup for LateQueue {
    fn queue(&self, name: &str) -> Lookup<Option<QueueView>> {
        let seen = self.0.fetch_add(1, Ordering::SeqCst) >= 2;
        Ok((seen && name == "fresh").then(|| queue_view("fresh", QueueState::Open, None)))
    }

    fn children(&self, _: &str) -> Lookup<Vec<String>> {
        Ok(Vec::new())
    }
}

impl PodGroupLookup for LateQueue {
    fn pod_group(&self, _: &str, _: &str) -> Lookup<Option<PodGroupView>> {
        Ok(None)
    }
    fn unfinished_pod_groups_in(&self, _: &str) -> Lookup<Vec<PodGroupView>> {
        Ok(Vec::new())
    }
    fn kubernetes_pod_group_priority(&self, _: &str, _: &str) -> Option<i32> {
        None
    }
    fn kubernetes_tree(&self, _: &str, _: &str) -> Option<Result<TreeOf, NoRoot>> {
        None
    }
}

impl CapacityLookup for LateQueue {
    fn schedulable_capacity(&self) -> Lookup<Resources> {
        Ok(Resources::new())
    }
}

impl TopologyLookup for LateQueue {
    fn topologies(&self) -> Lookup<BTreeMap<String, Topology>> {
        Ok(BTreeMap::new())
    }
}

impl NamespaceLookup for LateQueue {
    fn namespace_labels(&self, _: &str) -> Lookup<Option<BTreeMap<String, String>>> {
        Ok(None)
    }
}

#[tokio::test(start_paused = true)]
async fn a_queue_created_a_moment_before_its_first_group_is_found() {
    let router = router_with(
        LateQueue::default(),
        Settings {
            lookup_grace: Duration::from_secs(1),
            ..settings()
        },
    );
    let group = a_pod_group(json!({"minMember": 1, "queue": "fresh"}), None);
    allowed_unchanged(&post(router, VALIDATE_PODGROUPS, &create("podgroups", group)).await);
}

#[tokio::test(start_paused = true)]
async fn a_queue_that_never_appears_is_refused_after_the_grace() {
    let router = router_with(
        cluster(),
        Settings {
            lookup_grace: Duration::from_secs(1),
            ..settings()
        },
    );
    let started = tokio::time::Instant::now();
    let group = a_pod_group(json!({"minMember": 1, "queue": "nope"}), None);
    let answer = post(router, VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    denial(&answer, 404);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited <= Duration::from_secs(1),
        "{waited:?}"
    );
}

// ---- the wire
