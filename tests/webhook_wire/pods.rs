//! The pod webhooks: labels, the gate and the markers, admission on arrival, Volcano's,
//! LeaderWorkerSet's and Kubernetes' own group names, and the refusals of pods in closed,
//! missing or unselected queues and of gangs beyond the largest.

use gangplank::api::composite_pod_group::NoRoot;
use gangplank::cache::lookup::TreeOf;
use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn a_pod_with_the_coscheduling_label_gets_our_label_the_gate_and_the_marker() {
    assert_golden(router(), MUTATE_PODS, "pod-coscheduling-label").await;
}

#[tokio::test]
async fn a_job_pod_created_by_generate_name_joins_the_group_of_its_job() {
    assert_golden(router(), MUTATE_PODS, "pod-of-a-job").await;
}

#[tokio::test]
async fn a_pod_already_labelled_gated_and_marked_is_admitted_unchanged() {
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["spec"]["schedulingGates"] = json!([{"name": "scheduling.gangplank.dev/admission"}]);
    let markers = json!({"scheduling.gangplank.dev/managed": "1",
        "scheduling.gangplank.dev/placement": "1"});
    pod["spec"]["containers"][0]["resources"] =
        json!({"requests": markers.clone(), "limits": markers});
    allowed_unchanged(&post(router(), MUTATE_PODS, &create("pods", pod)).await);
}

#[tokio::test]
async fn a_gated_pod_created_with_gangplanks_record_of_admission_loses_the_record() {
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["metadata"]["annotations"] =
        json!({"scheduling.gangplank.dev/admitted": "2026-11-28T00:00:00Z", "team": "a"});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        ops.contains(&json!({"op": "remove",
            "path": "/metadata/annotations/scheduling.gangplank.dev~1admitted"})),
        "{ops:?}"
    );
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "{ops:?}"
    );
}

#[tokio::test]
async fn a_pod_that_names_no_group_or_queue_is_admitted_unchanged() {
    let pod = a_pod(json!({"app": "web"}));
    allowed_unchanged(&post(router(), MUTATE_PODS, &create("pods", pod)).await);
}

#[tokio::test]
async fn the_gate_is_added_beside_other_gates_and_only_at_create() {
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["spec"]["schedulingGates"] = json!([{"name": "example.com/quota"}]);
    let answer = post(router(), MUTATE_PODS, &create("pods", pod.clone())).await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/spec/schedulingGates/-",
            "value": {"name": "scheduling.gangplank.dev/admission"}})
    );
    allowed_unchanged(&post(router(), MUTATE_PODS, &update("pods", pod.clone(), pod)).await);
}

#[tokio::test]
async fn with_gating_off_a_pod_gets_labels_and_markers_but_no_gate() {
    let router = router_with(
        cluster(),
        Settings {
            gate_pods: false,
            ..settings()
        },
    );
    let pod = a_pod(json!({"scheduling.x-k8s.io/pod-group": "g"}));
    let answer = post(router, MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        patch(&answer),
        &json!(
            [
                vec![
                    json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "g"})
                ],
                both_markers()
            ]
            .concat()
        )
    );
}

/// Admits every gang on arrival.
struct OpenDoor;

impl webhooks::Arrivals for OpenDoor {
    fn admit_on_arrival(&self, _: &GroupKey, _: &str, _: &Resources) -> bool {
        true
    }
}

/// Admits every gang on arrival, and counts the calls (each takes room in the leader's ledger).
#[derive(Default)]
struct CountingDoor(AtomicUsize);

impl webhooks::Arrivals for CountingDoor {
    fn admit_on_arrival(&self, _: &GroupKey, _: &str, _: &Resources) -> bool {
        self.0.fetch_add(1, Ordering::SeqCst);
        true
    }
}

#[tokio::test]
async fn a_dry_run_pod_is_gated_as_if_nothing_were_admitted_on_arrival_and_takes_no_room() {
    let door = Arc::new(CountingDoor::default());
    let webhooks = Webhooks::new(Arc::new(cluster()), settings()).with_arrivals(door.clone());
    let router = webhooks::router(Arc::new(webhooks));
    let pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    let mut review = create("pods", pod.clone());
    review["request"]["dryRun"] = json!(true);
    let answer = post(router.clone(), MUTATE_PODS, &review).await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "a dry run shows the gate: {ops:?}"
    );
    assert_eq!(door.0.load(Ordering::SeqCst), 0, "a dry run took room");
    // The same pod for real is admitted on arrival, and takes its room.
    let answer = post(router, MUTATE_PODS, &create("pods", pod)).await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        !ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "{ops:?}"
    );
    assert_eq!(door.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_member_naming_resource_claims_is_gated_even_while_gangs_are_admitted_on_arrival() {
    let door = Arc::new(CountingDoor::default());
    let webhooks = Webhooks::new(Arc::new(cluster()), settings()).with_arrivals(door.clone());
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["spec"]["resourceClaims"] = json!([{"name": "gpus", "resourceClaimTemplateName": "t"}]);
    let answer = post(
        webhooks::router(Arc::new(webhooks)),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "its devices are counted by the cache, not here: {ops:?}"
    );
    assert_eq!(door.0.load(Ordering::SeqCst), 0, "it took room on arrival");
}

/// The patch for a member of `g` created while every gang is admitted on arrival, less the
/// record of its admission, which every such patch must carry (checked here).
async fn arrival_patch(settings: Settings, priority: Option<i32>) -> Value {
    let webhooks = Webhooks::new(Arc::new(cluster()), settings).with_arrivals(Arc::new(OpenDoor));
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    if let Some(priority) = priority {
        pod["spec"]["priority"] = json!(priority);
    }
    let answer = post(
        webhooks::router(Arc::new(webhooks)),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    let mut ops = patch(&answer).as_array().unwrap().clone();
    let record = ops
        .iter()
        .position(|op| {
            op["op"] == "add"
                && op["path"] == "/metadata/annotations"
                && op["value"]["scheduling.gangplank.dev/admitted"].is_string()
        })
        .unwrap_or_else(|| panic!("no record of the admission on arrival: {ops:?}"));
    ops.remove(record);
    Value::Array(ops)
}

#[tokio::test]
async fn a_member_of_a_gang_admitted_on_arrival_gets_no_gate_and_only_the_binding_marker() {
    assert_eq!(
        arrival_patch(settings(), None).await,
        json!([
            {"op": "add", "path": "/spec/containers/0/resources/requests",
                "value": {"scheduling.gangplank.dev/managed": "0"}},
            {"op": "add", "path": "/spec/containers/0/resources/limits",
                "value": {"scheduling.gangplank.dev/managed": "0"}}
        ])
    );
}

#[tokio::test]
async fn with_place_arrivals_a_member_admitted_on_arrival_gets_both_markers() {
    let settings = Settings {
        place_arrivals: true,
        ..settings()
    };
    assert_eq!(arrival_patch(settings, None).await, json!(both_markers()));
}

#[tokio::test]
async fn a_member_admitted_on_arrival_that_may_preempt_gets_both_markers() {
    assert_eq!(
        arrival_patch(settings(), Some(1000)).await,
        json!(both_markers())
    );
}

#[tokio::test]
async fn a_pod_naming_a_scheduler_nobody_serves_is_gated_even_at_an_open_door_and_warned() {
    let webhooks = Webhooks::new(Arc::new(cluster()), settings()).with_arrivals(Arc::new(OpenDoor));
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["spec"]["schedulerName"] = json!("nobody");
    let answer = post(
        webhooks::router(Arc::new(webhooks)),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"
            && op["value"] == json!([{"name": "scheduling.gangplank.dev/admission"}])),
        "{ops:?}"
    );
    let warnings = &answer["response"]["warnings"];
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.starts_with("spec.schedulerName \"nobody\" is not a scheduler")),
        "{warnings}"
    );
}

/// The patch operations that give a pod without resources each marker, at zero units.
fn both_markers() -> Vec<Value> {
    serde_json::from_value(json!([
            {"op": "add", "path": "/spec/containers/0/resources/requests",
                "value": {"scheduling.gangplank.dev/managed": "0"}},
            {"op": "add", "path": "/spec/containers/0/resources/limits",
                "value": {"scheduling.gangplank.dev/managed": "0"}},
            {"op": "add", "path": "/spec/containers/0/resources/requests/scheduling.gangplank.dev~1placement",
                "value": "0"},
            {"op": "add", "path": "/spec/containers/0/resources/limits/scheduling.gangplank.dev~1placement",
                "value": "0"}
    ]))
    .unwrap()
}

#[tokio::test]
async fn a_lone_marker_request_gets_a_limit_of_the_same_amount() {
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/queue": "research"}));
    pod["spec"]["schedulingGates"] = json!([{"name": "scheduling.gangplank.dev/admission"}]);
    pod["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "1",
        "scheduling.gangplank.dev/managed": "2", "scheduling.gangplank.dev/placement": "1"}});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        patch(&answer),
        &json!([
            {"op": "add", "path": "/spec/containers/0/resources/limits",
                "value": {"scheduling.gangplank.dev/managed": "2"}},
            {"op": "add", "path": "/spec/containers/0/resources/limits/scheduling.gangplank.dev~1placement",
                "value": "1"}
        ])
    );
}

#[tokio::test]
async fn a_pod_in_a_namespace_with_a_default_queue_gets_that_queue_and_no_group() {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["namespace"] = json!("team");
    let mut review = create("pods", pod);
    review["request"]["namespace"] = json!("team");
    let answer = post(router(), MUTATE_PODS, &review).await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1queue", "value": "research"})
    );
    assert!(
        !patch(&answer).to_string().contains("pod-group"),
        "a group of one gets no group label"
    );
}

#[tokio::test]
async fn volcano_annotations_become_our_labels() {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["annotations"] = json!({
        "scheduling.k8s.io/group-name": "spark-app",
        "scheduling.volcano.sh/queue-name": "research"});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        patch(&answer).as_array().unwrap()[..2],
        [
            json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "spark-app"}),
            json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1queue", "value": "research"})
        ]
    );
}

/// A pod of LeaderWorkerSet `lws`'s replica 0 as its StatefulSets make it (`index` 0: the
/// leader), with a queue label from the template; `completed` once LWS's own webhook has given
/// the leader its group key and each worker its index.
fn a_replica_pod(index: &str, size: &str, completed: bool) -> Value {
    let mut labels = json!({"scheduling.gangplank.dev/queue": "research",
        "leaderworkerset.sigs.k8s.io/name": "lws"});
    if index != "0" || completed {
        labels["leaderworkerset.sigs.k8s.io/group-key"] = json!("a3f5e1");
    }
    if index == "0" || completed {
        labels["leaderworkerset.sigs.k8s.io/worker-index"] = json!(index);
    }
    let mut pod = a_pod(labels);
    pod["metadata"]["annotations"] = json!({"leaderworkerset.sigs.k8s.io/size": size});
    pod
}

#[tokio::test]
async fn a_leader_worker_set_pod_joins_its_replica_s_group_once_lws_s_webhook_completed_it() {
    let group_label = "/metadata/labels/scheduling.gangplank.dev~1pod-group";
    for index in ["0", "1"] {
        // Called before LWS's webhook: a pod of the queue, in no group yet, gated all the same.
        let answer = post(
            router(),
            MUTATE_PODS,
            &create("pods", a_replica_pod(index, "4", false)),
        )
        .await;
        assert!(
            !patch(&answer).to_string().contains(group_label),
            "{answer}"
        );
        assert!(
            patch(&answer).to_string().contains("schedulingGates"),
            "{answer}"
        );
        // Called again after it (reinvocationPolicy IfNeeded): the group key names the group.
        let answer = post(
            router(),
            MUTATE_PODS,
            &create("pods", a_replica_pod(index, "4", true)),
        )
        .await;
        assert_eq!(
            patch(&answer)[0],
            json!({"op": "add", "path": group_label, "value": "a3f5e1"})
        );
    }
}

#[tokio::test]
async fn the_volcano_pod_group_lws_names_wins_over_the_replica_s_group_key() {
    let mut pod = a_replica_pod("1", "4", true);
    pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = json!("lws-0-5b8f");
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "lws-0-5b8f"})
    );
}

#[tokio::test]
async fn a_replica_larger_than_the_largest_gang_is_refused_at_its_leader_naming_lws_s_size() {
    let answer = post(
        router(),
        MUTATE_PODS,
        &create("pods", a_replica_pod("0", "10001", true)),
    )
    .await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[leaderworkerset.sigs.k8s.io/size]: must be at most 10000, Gangplank's largest gang, got 10001"
    );
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["metadata"]["annotations"] = json!({"scheduling.gangplank.dev/min-member": "20000"});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most 10000, Gangplank's largest gang, got 20000"
    );
    let answer = post(
        router(),
        MUTATE_PODS,
        &create("pods", a_replica_pod("0", "10000", true)),
    )
    .await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test]
async fn a_pod_naming_a_kubernetes_pod_group_in_its_scheduling_group_joins_that_group() {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["namespace"] = json!("team");
    pod["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
    let mut review = create("pods", pod);
    review["request"]["namespace"] = json!("team");
    let answer = post(router(), MUTATE_PODS, &review).await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "train"})
    );
}

/// The creation of a pod of namespace `team` naming Kubernetes' PodGroup `leaf`.
fn leaf_member(leaf: &str) -> serde_json::Value {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["namespace"] = json!("team");
    pod["spec"]["schedulingGroup"] = json!({"podGroupName": leaf});
    let mut review = create("pods", pod);
    review["request"]["namespace"] = json!("team");
    review
}

#[tokio::test]
async fn a_pod_of_a_tree_too_deep_is_refused_and_one_whose_parent_is_not_seen_yet_waits_in_its_pod_group()
 {
    let lookup = StaticLookup {
        kubernetes_trees: vec![
            (
                "team".into(),
                "deep".into(),
                Err(NoRoot::TooDeep("a".into())),
            ),
            (
                "team".into(),
                "early".into(),
                Err(NoRoot::Unknown("b".into())),
            ),
        ],
        ..cluster()
    };
    let router = router_with(lookup, settings());
    let answer = post(router.clone(), MUTATE_PODS, &leaf_member("deep")).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.schedulingGroup.podGroupName: PodGroup team/deep: CompositePodGroups above \"a\" are more than 4 levels deep or form a circle"
    );
    let answer = post(router, MUTATE_PODS, &leaf_member("early")).await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "early"}),
        "the controller moves it into its tree's gang once the cache shows the parent"
    );
}

#[tokio::test]
async fn a_pod_of_a_leaf_of_a_tree_of_composite_pod_groups_joins_the_gang_of_its_root() {
    let tree = |parent: &str| TreeOf {
        parent: parent.into(),
        root: "svc".into(),
    };
    let lookup = StaticLookup {
        kubernetes_trees: vec![("team".into(), "prefill-0".into(), Ok(tree("prefill")))],
        ..cluster()
    };
    let answer = post(
        router_with(lookup, settings()),
        MUTATE_PODS,
        &leaf_member("prefill-0"),
    )
    .await;
    let labels: Vec<_> = patch(&answer)
        .as_array()
        .unwrap()
        .iter()
        .filter(|op| {
            op["path"]
                .as_str()
                .unwrap()
                .starts_with("/metadata/labels/")
        })
        .map(|op| (op["path"].as_str().unwrap().to_owned(), op["value"].clone()))
        .collect();
    assert_eq!(
        labels,
        [
            (
                "/metadata/labels/scheduling.gangplank.dev~1pod-group".into(),
                json!("svc")
            ),
            (
                "/metadata/labels/scheduling.gangplank.dev~1composite-pod-group".into(),
                json!("prefill")
            ),
            (
                "/metadata/labels/scheduling.gangplank.dev~1kubernetes-pod-group".into(),
                json!("prefill-0")
            ),
        ]
    );
}

#[tokio::test]
async fn a_pod_whose_priority_differs_from_its_kubernetes_pod_group_s_is_refused_naming_both() {
    let lookup = StaticLookup {
        kubernetes_pod_groups: vec![("team".into(), "train".into(), 1000)],
        ..cluster()
    };
    let member = |priority: i32| {
        let mut pod = a_pod(json!({}));
        pod["metadata"]["namespace"] = json!("team");
        pod["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
        pod["spec"]["priority"] = json!(priority);
        pod["spec"]["priorityClassName"] = json!(if priority == 0 { "" } else { "high" });
        let mut review = create("pods", pod);
        review["request"]["namespace"] = json!("team");
        review
    };
    let router = router_with(lookup, settings());
    let answer = post(router.clone(), MUTATE_PODS, &member(0)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.priority: 0 (priorityClassName \"\") differs from 1000, the priority of PodGroup team/train of scheduling.k8s.io: the scheduler places no pod whose priority differs from its PodGroup's, so this one would wait for ever; give it the PodGroup's priorityClassName"
    );
    let answer = post(router, MUTATE_PODS, &member(1000)).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test]
async fn a_volcano_group_name_that_cannot_name_a_pod_group_is_refused() {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "Spark_App"});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.k8s.io/group-name]: must be at most 63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit, got \"Spark_App\""
    );
}

#[tokio::test]
async fn a_pod_of_a_group_or_queue_created_on_a_node_is_refused_naming_the_field() {
    for labels in [
        json!({"scheduling.x-k8s.io/pod-group": "g"}),
        json!({"scheduling.gangplank.dev/queue": "research"}),
    ] {
        let mut pod = a_pod(labels);
        pod["spec"]["nodeName"] = json!("kwok-node-0");
        let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
        assert!(
            denial(&answer, 422)
                .starts_with("spec.nodeName: a pod of a group or queue is placed by the scheduler"),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn before_namespaces_are_listed_a_pod_naming_nothing_is_refused_with_a_retry_message() {
    let router = router_with(
        StaticLookup {
            unsynced: true,
            ..cluster()
        },
        settings(),
    );
    let answer = post(router, MUTATE_PODS, &create("pods", a_pod(json!({})))).await;
    assert_eq!(
        denial(&answer, 503),
        "Gangplank has not finished listing Namespaces yet; retry in a few seconds"
    );
    assert_eq!(answer["response"]["status"]["reason"], "ServiceUnavailable");
}

// ---- pods: the queue check (in the mutating call)

#[tokio::test]
async fn a_pod_of_a_group_in_a_closed_queue_is_refused() {
    let lookup = StaticLookup {
        pod_groups: vec![group_view("gang", "archive", PodGroupPhase::Pending)],
        ..cluster()
    };
    let pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "gang"}));
    let answer = post(
        router_with(lookup, settings()),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    assert_eq!(
        denial(&answer, 403),
        "metadata.labels[scheduling.gangplank.dev/pod-group] (PodGroup ml/gang has spec.queue \"archive\"): queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
}

#[tokio::test]
async fn a_replacement_member_of_an_admitted_group_in_a_closed_queue_is_admitted() {
    let lookup = StaticLookup {
        pod_groups: vec![group_view("gang", "archive", PodGroupPhase::Running)],
        ..cluster()
    };
    let pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "gang"}));
    let answer = post(
        router_with(lookup, settings()),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test]
async fn a_pod_of_no_group_in_a_closed_queue_is_refused() {
    let pod = a_pod(json!({"scheduling.gangplank.dev/queue": "archive"}));
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        denial(&answer, 403),
        "metadata.labels[scheduling.gangplank.dev/queue]: queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
}

#[tokio::test]
async fn a_pod_naming_a_queue_that_does_not_exist_is_refused() {
    let pod = a_pod(json!({"scheduling.gangplank.dev/queue": "nope"}));
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        denial(&answer, 404),
        "metadata.labels[scheduling.gangplank.dev/queue]: queue \"nope\" does not exist; name an existing queue (kubectl get queues)"
    );
}

#[tokio::test]
async fn a_pod_in_an_open_queue_or_a_group_not_created_yet_is_admitted() {
    for labels in [
        json!({"scheduling.gangplank.dev/queue": "research"}),
        json!({"scheduling.gangplank.dev/pod-group": "later"}),
    ] {
        let answer = post(router(), MUTATE_PODS, &create("pods", a_pod(labels))).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
}

// ---- workloads

// ---- pods of a Kueue Workload

/// A pod of a Job Kueue admitted: its PodSet's label and the Workload's annotation.
fn a_kueue_pod() -> Value {
    let mut pod = a_pod(json!({"kueue.x-k8s.io/podset": "main", "job-name": "train"}));
    pod["metadata"]["annotations"] = json!({"kueue.x-k8s.io/workload": "job-train-5c4f2"});
    pod
}

#[tokio::test]
async fn a_pod_kueue_admitted_joins_the_gang_gangplank_made_for_its_workload() {
    let lookup = StaticLookup {
        pod_groups: vec![group_view(
            "job-train-5c4f2",
            "default",
            PodGroupPhase::Inqueue,
        )],
        ..cluster()
    };
    let answer = post(
        router_with(lookup, settings()),
        MUTATE_PODS,
        &create("pods", a_kueue_pod()),
    )
    .await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "job-train-5c4f2"})
    );
}

#[tokio::test]
async fn a_pod_kueue_admitted_without_gangplanks_check_is_left_alone() {
    let answer = post(router(), MUTATE_PODS, &create("pods", a_kueue_pod())).await;
    assert_eq!(
        answer["response"]["allowed"], true,
        "no Gangplank PodGroup of the Workload's name: {answer}"
    );
    assert!(answer["response"].get("patch").is_none(), "{answer}");
}
