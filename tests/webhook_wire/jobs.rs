//! The workload and Job webhooks: queues put on pod templates, gang sizes a Job can reach,
//! topology annotations, closed queues.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn a_workload_naming_a_queue_puts_it_on_every_pod_template_that_names_none() {
    let jobset = a_jobset(
        "research",
        json!({"scheduling.gangplank.dev/queue": "default"}),
    );
    let answer = post(router(), MUTATE_WORKLOADS, &create("jobsets", jobset)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add",
            "path": "/spec/replicatedJobs/0/template/spec/template/metadata/labels",
            "value": {"scheduling.gangplank.dev/queue": "research"}}])
    );

    let pytorch = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "ml",
            "labels": {"scheduling.gangplank.dev/queue": "research"}},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {}}},
            "Worker": {"replicas": 3, "template": {"spec": {}}}}}
    });
    let answer = post(router(), MUTATE_WORKLOADS, &create("pytorchjobs", pytorch)).await;
    assert_eq!(
        patch(&answer),
        &json!([
            {"op": "add",
                "path": "/spec/pytorchReplicaSpecs/Master/template/metadata/labels/scheduling.gangplank.dev~1queue",
                "value": "research"},
            {"op": "add", "path": "/spec/pytorchReplicaSpecs/Worker/template/metadata",
                "value": {"labels": {"scheduling.gangplank.dev/queue": "research"}}}
        ])
    );
}

#[tokio::test]
async fn a_workload_naming_a_closed_missing_or_invalid_queue_is_refused_naming_its_label() {
    for (queue, code, says) in [
        ("archive", 403, "is Closed"),
        ("nowhere", 404, "does not exist"),
        ("Not_A_Name", 422, "lowercase"),
    ] {
        let answer = post(
            router(),
            MUTATE_WORKLOADS,
            &create("jobsets", a_jobset(queue, Value::Null)),
        )
        .await;
        let message = denial(&answer, code);
        assert!(
            message.contains("metadata.labels[scheduling.gangplank.dev/queue]"),
            "{message}"
        );
        assert!(message.contains(says), "{message}");
    }
}

#[tokio::test]
async fn a_jobset_whose_min_replicas_do_not_fit_its_replicated_jobs_is_refused_naming_the_annotation()
 {
    let annotated = |value: &str| {
        let mut jobset = a_jobset("research", Value::Null);
        jobset["metadata"]["annotations"] = json!({"scheduling.gangplank.dev/min-replicas": value});
        create("jobsets", jobset)
    };
    for (value, says) in [
        ("workers=2", "from 1 to its 1 replicas"),
        (
            "trainers=1",
            "names no kind of replica (replicated job) of the spec; name one of leader, workers",
        ),
        ("workers", "must be <name>=<count>"),
    ] {
        let answer = post(router(), MUTATE_WORKLOADS, &annotated(value)).await;
        let message = denial(&answer, 422);
        assert!(
            message.contains("metadata.annotations[scheduling.gangplank.dev/min-replicas]"),
            "{message}"
        );
        assert!(message.contains(says), "{message}");
    }
    let answer = post(router(), MUTATE_WORKLOADS, &annotated("workers=1")).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test]
async fn a_leader_worker_set_of_whole_replicas_gets_its_queue_and_its_group_on_its_templates() {
    let lws = |name: Value, annotations: Value| {
        json!({
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "generateName": "svc-", "namespace": "ml",
                "labels": {"scheduling.gangplank.dev/queue": "research"},
                "annotations": annotations},
            "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 4,
                "workerTemplate": {"spec": {"containers": [{"name": "main"}]}}}}
        })
    };
    let whole = json!({"scheduling.gangplank.dev/min-replicas": "2"});
    let answer = post(
        router(),
        MUTATE_WORKLOADS,
        &create("leaderworkersets", lws(json!("svc"), whole.clone())),
    )
    .await;
    assert_eq!(
        patch(&answer),
        &json!([
            {"op": "add", "path": "/spec/leaderWorkerTemplate/workerTemplate/metadata",
                "value": {"labels": {"scheduling.gangplank.dev/queue": "research"}}},
            {"op": "add",
                "path": "/spec/leaderWorkerTemplate/workerTemplate/metadata/labels/scheduling.gangplank.dev~1pod-group",
                "value": "svc"}
        ])
    );

    let answer = post(
        router(),
        MUTATE_WORKLOADS,
        &create("leaderworkersets", lws(json!("svc"), Value::Null)),
    )
    .await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add",
            "path": "/spec/leaderWorkerTemplate/workerTemplate/metadata",
            "value": {"labels": {"scheduling.gangplank.dev/queue": "research"}}}]),
        "a gang per replica: no group named"
    );

    let answer = post(
        router(),
        MUTATE_WORKLOADS,
        &create("leaderworkersets", lws(Value::Null, whole)),
    )
    .await;
    let message = denial(&answer, 422);
    assert!(
        message.contains("metadata.name: a workload annotated"),
        "{message}"
    );
}

// ---- jobs

#[tokio::test]
async fn a_job_with_a_queue_gets_its_group_and_queue_on_the_pod_template() {
    assert_golden(router(), MUTATE_JOBS, "job-with-queue").await;
}

#[tokio::test]
async fn a_job_created_with_generate_name_gets_only_the_queue_on_its_template() {
    let mut job = a_job(json!({}), json!({}));
    job["metadata"]["name"] = Value::Null;
    job["metadata"]["generateName"] = json!("train-");
    let answer = post(router(), MUTATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/template/metadata/labels",
            "value": {"scheduling.gangplank.dev/queue": "research"}}])
    );
}

#[tokio::test]
async fn a_job_of_a_jobset_gets_only_the_queue_so_its_pods_join_the_jobset() {
    let mut job = a_job(json!({}), json!({}));
    job["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = json!("train");
    job["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] = json!("u1");
    let answer = post(router(), MUTATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/template/metadata/labels",
            "value": {"scheduling.gangplank.dev/queue": "research"}}])
    );
}

#[tokio::test]
async fn a_min_member_above_parallelism_is_refused() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "4"}),
        json!({"parallelism": 2}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most spec.parallelism (2), the number of pods the Job runs at once, got 4"
    );
}

#[tokio::test]
async fn a_job_whose_gang_would_be_beyond_the_limit_is_refused_naming_the_field_and_the_limit() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "2147483647"}),
        json!({"parallelism": 2147483647}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most 10000, Gangplank's largest gang, got 2147483647"
    );
    let job = a_job(json!({}), json!({"parallelism": 2147483647}));
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.parallelism (the gang size, as metadata.annotations[scheduling.gangplank.dev/min-member] is absent): must be at most 10000, Gangplank's largest gang, got 2147483647; set metadata.annotations[scheduling.gangplank.dev/min-member] to a gang size within it"
    );
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "100"}),
        json!({"parallelism": 2147483647}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    allowed_unchanged(&answer);
}

#[tokio::test]
async fn a_min_member_above_completions_is_refused_naming_completions() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "3"}),
        json!({"parallelism": 4, "completions": 2}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most spec.completions (2), the number of pods the Job runs at once, got 3"
    );
}

#[tokio::test]
async fn a_min_member_that_is_not_a_positive_integer_is_refused() {
    for value in ["0", "-1", "four", "2.5", ""] {
        let job = a_job(
            json!({"scheduling.gangplank.dev/min-member": value}),
            json!({"parallelism": 4}),
        );
        let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
        assert_eq!(
            denial(&answer, 422),
            format!(
                "metadata.annotations[scheduling.gangplank.dev/min-member]: must be a positive integer, got {value:?}"
            )
        );
    }
}

#[tokio::test]
async fn lowering_parallelism_below_min_member_is_refused_but_pausing_at_zero_is_not() {
    let old = a_job(
        json!({"scheduling.gangplank.dev/min-member": "4"}),
        json!({"parallelism": 4}),
    );
    let lowered = a_job(
        json!({"scheduling.gangplank.dev/min-member": "4"}),
        json!({"parallelism": 3}),
    );
    let answer = post(
        router(),
        VALIDATE_JOBS,
        &update("jobs", old.clone(), lowered),
    )
    .await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most spec.parallelism (3), the number of pods the Job runs at once, got 4"
    );
    let paused = a_job(
        json!({"scheduling.gangplank.dev/min-member": "4"}),
        json!({"parallelism": 0}),
    );
    allowed_unchanged(&post(router(), VALIDATE_JOBS, &update("jobs", old, paused)).await);
}

#[tokio::test]
async fn a_template_naming_another_queue_than_its_job_is_refused() {
    let mut job = a_job(json!({}), json!({}));
    job["spec"]["template"]["metadata"]["labels"] =
        json!({"scheduling.gangplank.dev/queue": "default"});
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.template.metadata.labels[scheduling.gangplank.dev/queue]: must be the Job's own queue \"research\" (metadata.labels[scheduling.gangplank.dev/queue]) or absent, got \"default\""
    );
}

#[tokio::test]
async fn a_job_whose_topology_key_annotation_is_not_a_label_key_is_refused() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/topology-key": "rack name"}),
        json!({}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert!(
        denial(&answer, 422).starts_with(
            "metadata.annotations[scheduling.gangplank.dev/topology-key]: must be a label key"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn a_job_whose_preferred_topology_key_annotation_is_not_a_label_key_is_refused() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/preferred-topology-key": "rack/of/node"}),
        json!({}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert!(
        denial(&answer, 422).starts_with(
            "metadata.annotations[scheduling.gangplank.dev/preferred-topology-key]: must be a label key"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn a_new_job_in_a_closed_queue_is_refused() {
    let mut job = a_job(json!({}), json!({}));
    job["metadata"]["labels"] = json!({"scheduling.gangplank.dev/queue": "archive"});
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 403),
        "metadata.labels[scheduling.gangplank.dev/queue]: queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
}

#[tokio::test]
async fn a_reachable_min_member_in_an_open_queue_is_admitted() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "2"}),
        json!({"parallelism": 4}),
    );
    allowed_unchanged(&post(router(), VALIDATE_JOBS, &create("jobs", job)).await);
}

// ---- podgroups
