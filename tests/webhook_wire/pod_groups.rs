//! The PodGroup webhooks: the default queue, gang sizes and their limits, topology keys and
//! levels, times, and what may change once a group is admitted.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn a_pod_group_without_a_queue_gets_the_default_queue() {
    assert_golden(router(), MUTATE_PODGROUPS, "podgroup-without-queue").await;
}

#[tokio::test]
async fn a_pod_group_takes_its_queue_from_its_label_then_its_namespace() {
    let mut labelled = a_pod_group(json!({"minMember": 2}), None);
    labelled["metadata"]["labels"] = json!({"scheduling.gangplank.dev/queue": "archive"});
    let answer = post(router(), MUTATE_PODGROUPS, &create("podgroups", labelled)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/queue", "value": "archive"}])
    );

    let mut review = create("podgroups", a_pod_group(json!({"minMember": 2}), None));
    review["request"]["namespace"] = json!("team");
    let answer = post(router(), MUTATE_PODGROUPS, &review).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/queue", "value": "research"}])
    );
}

#[tokio::test]
async fn an_update_without_a_queue_keeps_the_queue_the_group_had() {
    let old = a_pod_group(json!({"minMember": 2, "queue": "research"}), None);
    let mut new = a_pod_group(json!({"minMember": 3}), None);
    new["metadata"]["labels"] = json!({"scheduling.gangplank.dev/queue": "archive"});
    let answer = post(router(), MUTATE_PODGROUPS, &update("podgroups", old, new)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/queue", "value": "research"}])
    );
}

#[tokio::test]
async fn a_pod_group_that_names_its_queue_is_not_changed() {
    let group = a_pod_group(json!({"minMember": 2, "queue": "research"}), None);
    allowed_unchanged(&post(router(), MUTATE_PODGROUPS, &create("podgroups", group)).await);
}

#[tokio::test]
async fn gang_sizes_below_one_or_above_the_elastic_bound_are_refused_together() {
    let group = a_pod_group(json!({"minMember": 0, "maxMember": -1}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.minMember: must be at least 1, got 0; spec.maxMember: must be at least spec.minMember (0) or unset, got -1"
    );
    let group = a_pod_group(json!({"minMember": 4, "maxMember": 2}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.maxMember: must be at least spec.minMember (4) or unset, got 2"
    );
}

#[tokio::test]
async fn a_pod_group_of_min_member_beyond_the_limit_is_refused_naming_the_field_and_the_limit() {
    let group = a_pod_group(
        json!({"minMember": 2147483647, "maxMember": 2147483647}),
        None,
    );
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.minMember: must be at most 10000, Gangplank's largest gang, got 2147483647; spec.maxMember: must be at most 10000, Gangplank's largest gang, got 2147483647"
    );
    let group = a_pod_group(json!({"minMember": 10000, "maxMember": 10000}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    allowed_unchanged(&answer);
}

#[tokio::test]
async fn a_pod_group_whose_preferred_topology_key_is_not_a_label_key_is_refused_naming_the_field() {
    let group = a_pod_group(
        json!({"minMember": 2, "topologyKey": "topology.kubernetes.io/zone", "preferredTopologyKey": "rack name"}),
        None,
    );
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert!(
        denial(&answer, 422).starts_with("spec.preferredTopologyKey: must be a label key"),
        "{answer}"
    );
    let group = a_pod_group(
        json!({"minMember": 2, "topologyKey": "topology.kubernetes.io/zone", "preferredTopologyKey": "example.com/rack"}),
        None,
    );
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    allowed_unchanged(&answer);
}

#[tokio::test]
async fn a_members_in_stages_annotation_other_than_true_or_false_is_refused_naming_it() {
    let mut group = a_pod_group(json!({"minMember": 5}), None);
    group["metadata"]["annotations"] = json!({"scheduling.gangplank.dev/members-in-stages": "yes"});
    let answer = post(
        router(),
        VALIDATE_PODGROUPS,
        &create("podgroups", group.clone()),
    )
    .await;
    assert_eq!(
        denial(&answer, 422),
        r#"metadata.annotations[scheduling.gangplank.dev/members-in-stages]: must be "true" or "false", got "yes""#
    );
    group["metadata"]["annotations"] =
        json!({"scheduling.gangplank.dev/members-in-stages": "true"});
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    allowed_unchanged(&answer);
}

/// [`cluster`] with a Topology `dc` of levels zone, block and rack.
fn with_racks() -> Router {
    let lookup = StaticLookup {
        topologies: vec![Topology {
            name: "dc".into(),
            levels: ["zone", "block", "rack"].map(String::from).to_vec(),
        }],
        ..cluster()
    };
    router_with(lookup, settings())
}

#[tokio::test]
async fn a_preferred_topology_level_wider_than_the_required_one_is_refused_naming_the_topology() {
    let group = a_pod_group(
        json!({"minMember": 2, "topologyKey": "rack", "preferredTopologyKey": "zone"}),
        None,
    );
    let answer = post(
        with_racks(),
        VALIDATE_PODGROUPS,
        &create("podgroups", group),
    )
    .await;
    assert_eq!(
        denial(&answer, 422),
        "spec.preferredTopologyKey: must be at or below the required level rack, but Topology dc lists zone above it (levels, widest first: zone, block, rack); choose a narrower preferred level or a wider required one"
    );
    let group = a_pod_group(
        json!({"minMember": 2, "topologyKey": "zone", "preferredTopologyKey": "rack"}),
        None,
    );
    let answer = post(
        with_racks(),
        VALIDATE_PODGROUPS,
        &create("podgroups", group),
    )
    .await;
    allowed_unchanged(&answer);
    let job = a_job(
        json!({"scheduling.gangplank.dev/topology-key": "block",
               "scheduling.gangplank.dev/preferred-topology-key": "zone"}),
        json!({}),
    );
    let answer = post(with_racks(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert!(
        denial(&answer, 422).starts_with(
            "metadata.annotations[scheduling.gangplank.dev/preferred-topology-key]: must be at or below the required level block"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn waiting_and_running_times_below_one_second_are_refused() {
    let group = a_pod_group(
        json!({"minMember": 1, "maxWaitSeconds": 0, "expectedRuntimeSeconds": -5}),
        None,
    );
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.maxWaitSeconds: must be at least 1 (seconds) or unset, got 0; spec.expectedRuntimeSeconds: must be at least 1 (seconds) or unset, got -5"
    );
    let queue = a_queue("team", json!({"maxWaitSeconds": 0}), json!({}));
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.maxWaitSeconds: must be at least 1 (seconds) or unset, got 0"
    );
}

#[tokio::test]
async fn a_pod_group_in_a_missing_or_closed_queue_is_refused() {
    let group = a_pod_group(json!({"minMember": 1, "queue": "nope"}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 404),
        "spec.queue: queue \"nope\" does not exist; name an existing queue (kubectl get queues)"
    );
    let group = a_pod_group(json!({"minMember": 1, "queue": "archive"}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 403),
        "spec.queue: queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
}

/// The cluster, with queue `team-a` open only to namespaces labelled `team: a` (`a-train`).
fn cluster_with_a_team_queue() -> StaticLookup {
    let mut lookup = cluster();
    lookup.queues.push(QueueView {
        namespaces: Some(serde_json::from_value(json!({"matchLabels": {"team": "a"}})).unwrap()),
        ..queue_view("team-a", QueueState::Open, None)
    });
    lookup.labelled = vec![(
        "a-train".into(),
        BTreeMap::from([("team".into(), "a".into())]),
    )];
    lookup
}

#[tokio::test]
async fn pods_and_groups_of_a_namespace_a_queue_does_not_select_are_refused() {
    let router = || router_with(cluster_with_a_team_queue(), settings());
    let group = a_pod_group(json!({"minMember": 1, "queue": "team-a"}), None);
    let answer = post(
        router(),
        VALIDATE_PODGROUPS,
        &create("podgroups", group.clone()),
    )
    .await;
    assert!(
        denial(&answer, 403).starts_with(
            "spec.queue: queue \"team-a\" admits work only from namespaces matching its spec.namespaceSelector (team=a), and namespace \"ml\" does not match"
        ),
        "{answer}"
    );
    let pod = a_pod(json!({"scheduling.gangplank.dev/queue": "team-a"}));
    let answer = post(router(), MUTATE_PODS, &create("pods", pod.clone())).await;
    assert!(
        denial(&answer, 403).contains("namespace \"ml\" does not match"),
        "{answer}"
    );

    let mut review = create("podgroups", group);
    review["request"]["namespace"] = json!("a-train");
    review["request"]["object"]["metadata"]["namespace"] = json!("a-train");
    allowed_unchanged(&post(router(), VALIDATE_PODGROUPS, &review).await);
    let mut review = create("pods", pod);
    review["request"]["namespace"] = json!("a-train");
    review["request"]["object"]["metadata"]["namespace"] = json!("a-train");
    let answer = post(router(), MUTATE_PODS, &review).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test]
async fn the_gang_of_a_running_group_cannot_change_size_or_queue() {
    let old = a_pod_group(
        json!({"minMember": 4, "queue": "research"}),
        Some("Running"),
    );
    let new = a_pod_group(json!({"minMember": 2, "queue": "default"}), Some("Running"));
    let answer = post(router(), VALIDATE_PODGROUPS, &update("podgroups", old, new)).await;
    assert_eq!(
        denial(&answer, 403),
        "spec.minMember: cannot change from 4 to 2 while the group is Running; spec.queue: cannot change from \"research\" to \"default\" while the group is Running; its gang was admitted as it is; wait until the group finishes, or delete it and create a new one"
    );
}

#[tokio::test]
async fn the_gang_of_a_group_admitted_ahead_cannot_grow_before_its_status_says_so() {
    let mut old = a_pod_group(
        json!({"minMember": 2, "queue": "research"}),
        Some("Pending"),
    );
    old["metadata"]["annotations"] =
        json!({"scheduling.gangplank.dev/admitted-ahead": "2026-11-28T08:00:00Z"});
    let mut new = old.clone();
    new["spec"]["minMember"] = json!(50);
    let answer = post(router(), VALIDATE_PODGROUPS, &update("podgroups", old, new)).await;
    assert!(
        denial(&answer, 403).starts_with(
            "spec.minMember: cannot change from 2 to 50 while the group is admitted ahead of its members"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn a_waiting_group_may_change_its_gang_and_a_running_one_its_other_fields() {
    let old = a_pod_group(
        json!({"minMember": 4, "queue": "research"}),
        Some("Pending"),
    );
    let new = a_pod_group(json!({"minMember": 2, "queue": "default"}), Some("Pending"));
    allowed_unchanged(&post(router(), VALIDATE_PODGROUPS, &update("podgroups", old, new)).await);
    let old = a_pod_group(
        json!({"minMember": 4, "queue": "research"}),
        Some("Running"),
    );
    let new = a_pod_group(
        json!({"minMember": 4, "queue": "research", "maxMember": 8}),
        Some("Running"),
    );
    allowed_unchanged(&post(router(), VALIDATE_PODGROUPS, &update("podgroups", old, new)).await);
}

#[tokio::test]
async fn a_group_moving_into_a_closed_queue_is_refused_but_one_staying_there_is_not() {
    let old = a_pod_group(json!({"minMember": 1, "queue": "research"}), None);
    let moved = a_pod_group(json!({"minMember": 1, "queue": "archive"}), None);
    let answer = post(
        router(),
        VALIDATE_PODGROUPS,
        &update("podgroups", old, moved.clone()),
    )
    .await;
    assert_eq!(
        denial(&answer, 403),
        "spec.queue: queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
    let mut relabelled = moved.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    allowed_unchanged(
        &post(
            router(),
            VALIDATE_PODGROUPS,
            &update("podgroups", moved, relabelled),
        )
        .await,
    );
}

// ---- queues

#[tokio::test]
async fn a_pod_group_field_of_the_wrong_type_is_a_denial_naming_the_field_not_a_400() {
    for (min_member, problem) in [
        (json!("3"), "invalid type: string \"3\", expected i32"),
        (
            json!(2147483648u64),
            "invalid value: integer `2147483648`, expected i32",
        ),
    ] {
        let group = a_pod_group(json!({"minMember": min_member}), None);
        let answer = post(router(), MUTATE_PODGROUPS, &create("podgroups", group)).await;
        assert_eq!(
            denial(&answer, 422),
            format!("spec.minMember: {problem} (not what a PodGroup holds there)")
        );
    }
}
