//! Kubernetes' own gangs (the Workload API, `scheduling.k8s.io/v1beta1`, feature gate
//! `GenericWorkload`) through a real API server and the stock scheduler: Gangplank admits them
//! in their queue, the scheduler's PodGroup cycle places them whole with no bind held by
//! Gangplank, and reclaim takes them whole. Also the built-in Job's path under `WorkloadWithJob`.
//! These tests need both gates, which `e2e/test` turns on; the cluster is 4 nodes of 32 CPUs.

use gangplank::api::{PodGroup, labels};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use serde_json::json;

use crate::queues::{
    cap_cpu, cpu_cap, create_gang, create_queue, not_admitted_because, running_cpu_by_prefix,
};
use crate::reclaim::high_priority_class;
use crate::support::{
    Cluster, bound_eventually, bound_with_prefix, default_queue, delete_queue, events_about,
    eventually, held_gangs, holds_for, pod, pod_group_in_phase,
};

/// Panics unless the cluster runs with `gate` on.
pub fn needs_gate(cluster: &Cluster, gate: &str) {
    let gates = cluster
        .env
        .get("GP_FEATURE_GATES")
        .cloned()
        .unwrap_or_default();
    assert!(
        gates.contains(&format!("{gate}=true")),
        "this test needs the feature gate {gate}: bring the cluster up with e2e/up --feature-gates GenericWorkload=true,WorkloadWithJob=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true (e2e/test does), not {gates:?}"
    );
}

/// The namespace's objects of `scheduling.k8s.io/v1beta1` `kind`.
pub fn upstream(client: &Client, namespace: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("scheduling.k8s.io", "v1beta1", kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

pub fn object(manifest: serde_json::Value) -> DynamicObject {
    serde_json::from_value(manifest).unwrap()
}

/// A bare pod of `cpu` CPUs in Kubernetes' PodGroup `group`; Gangplank's webhook sees it
/// because its namespace has a default queue.
pub fn member(name: &str, group: &str, cpu: u32) -> Pod {
    pod(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulingGroup": {"podGroupName": group},
            "containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    }))
}

/// Whether Kubernetes' PodGroup says the scheduler placed it (`PodGroupInitiallyScheduled`).
async fn scheduled_by_the_scheduler(groups: &Api<DynamicObject>, name: &str) -> bool {
    let Ok(group) = groups.get(name).await else {
        return false;
    };
    group.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "PodGroupInitiallyScheduled" && c["status"] == "True")
}

/// Waits until Gangplank's PodGroup `name` says it waits because its queue is at capability
/// (before its members exist, it says it waits for them).
async fn waits_for_its_queue_s_capability(groups: &Api<PodGroup>, name: &str) {
    eventually(
        &format!("PodGroup {name} to say it waits for its queue's capability"),
        30,
        || async {
            let why = not_admitted_because(groups, name).await?;
            why.contains("has reached its capability").then_some(())
        },
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_workload_s_pod_group_waits_in_its_queue_with_a_reason_then_the_scheduler_places_it_whole()
 {
    let cluster = Cluster::connect().await;
    needs_gate(&cluster, "GenericWorkload");
    let queue = create_queue(&cluster.client, "wl-capped", cpu_cap("64")).await;
    let ns = cluster.namespace("workload-api-wait").await;
    default_queue(&cluster, &ns.name, &queue).await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let workloads = upstream(&cluster.client, &ns.name, "Workload");
    let sources = upstream(&cluster.client, &ns.name, "PodGroup");
    let held_before = held_gangs(&cluster).await;

    workloads
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                "metadata": {"name": "train"},
                "spec": {"podGroupTemplates": [
                    {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}]}
            })),
        )
        .await
        .unwrap();
    sources
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "workers", "labels": {(labels::QUEUE_LABEL): queue}},
                "spec": {"workloadRef": {"workloadName": "train", "templateName": "workers"},
                    "schedulingPolicy": {"gang": {"minCount": 3}}, "disruptionMode": {"all": {}}}
            })),
        )
        .await
        .unwrap();
    let group = pod_group_in_phase(&groups, "workers", "Pending").await;
    assert_eq!(group.spec.min_member, 3);
    assert_eq!(group.spec.queue.as_deref(), Some(queue.as_str()));

    // 96 CPUs in a queue capped at 64: the gang waits whole, and says why.
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &member(&format!("workers-{i}"), "workers", 32),
        )
        .await
        .unwrap();
    }
    waits_for_its_queue_s_capability(&groups, "workers").await;
    holds_for(5, "no member of workers bound", async || {
        bound_with_prefix(&pods, "workers-").await.is_empty()
    })
    .await;

    // Room in the queue: Gangplank admits it, the scheduler's PodGroup cycle places it whole.
    cap_cpu(&cluster, &queue, "96").await;
    bound_eventually("all three members bound", 60, &pods, "workers-", 3).await;
    eventually(
        "the scheduler to say it placed the PodGroup",
        30,
        || async {
            scheduled_by_the_scheduler(&sources, "workers")
                .await
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        held_gangs(&cluster).await,
        held_before,
        "Gangplank held no bind: the scheduler's PodGroup cycle gangs it"
    );
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn reclaim_takes_a_borrowing_queue_s_workload_api_gangs_whole() {
    let cluster = Cluster::connect().await;
    needs_gate(&cluster, "GenericWorkload");
    let lender = create_queue(&cluster.client, "wl-lender", Default::default()).await;
    let claimant = create_queue(&cluster.client, "wl-claimant", Default::default()).await;
    let ns = cluster.namespace("workload-api-reclaim").await;
    default_queue(&cluster, &ns.name, &lender).await;
    let pods = ns.api::<Pod>();
    let sources = upstream(&cluster.client, &ns.name, "PodGroup");

    // The lender borrows the whole cluster: four Kubernetes gangs of 2 x 16 CPUs.
    for g in 0..4 {
        let name = format!("a{g}");
        sources
            .create(
                &PostParams::default(),
                &object(json!({
                    "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "labels": {(labels::QUEUE_LABEL): lender}},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                        "disruptionMode": {"all": {}}}
                })),
            )
            .await
            .unwrap();
        for m in 0..2 {
            pods.create(
                &PostParams::default(),
                &member(&format!("a{g}-{m}"), &name, 16),
            )
            .await
            .unwrap();
        }
    }
    bound_eventually("the lender's 8 pods bound", 60, &pods, "a", 8).await;

    // The claimant, of the same weight, asks for half: 64 CPUs in Gangplank gangs.
    for g in 0..2 {
        create_gang(&ns, &claimant, &format!("b{g}"), 2, 16, None, None).await;
    }
    eventually("the claimant to run its 64 CPUs", 90, || async {
        let cpu = running_cpu_by_prefix(&pods).await;
        let claimed: f64 = cpu
            .iter()
            .filter(|(k, _)| k.starts_with('b'))
            .map(|(_, v)| v)
            .sum();
        (claimed >= 64.0).then_some(())
    })
    .await;
    let left: Vec<String> = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .filter(|n| n.starts_with('a'))
        .collect();
    for g in 0..4 {
        let members = left
            .iter()
            .filter(|n| n.starts_with(&format!("a{g}-")))
            .count();
        assert!(
            members == 0 || members == 2,
            "gang a{g} lost {} of its 2 members: {left:?}",
            2 - members
        );
    }
    assert_eq!(
        left.len(),
        4,
        "two whole gangs reclaimed, no more: {left:?}"
    );
    ns.delete().await;
    delete_queue(&cluster.client, &lender).await;
    delete_queue(&cluster.client, &claimant).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_job_on_the_workload_with_job_path_is_its_queue_s_gang_and_kubernetes_pod_group_gets_none()
 {
    let cluster = Cluster::connect().await;
    needs_gate(&cluster, "WorkloadWithJob");
    let queue = create_queue(&cluster.client, "wl-job", cpu_cap("64")).await;
    let ns = cluster.namespace("workload-api-job").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let sources = upstream(&cluster.client, &ns.name, "PodGroup");

    // generateName: the Job webhook cannot name the group; its pods join the Job's anyway.
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"generateName": "train-", "labels": {(labels::QUEUE_LABEL): queue}},
        "spec": {"parallelism": 3, "completions": 3,
            "scheduling": {"schedulingPolicy": {"gang": {"minCount": 3}}},
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "32"}}}]}}}
    }))
    .unwrap();
    let job = ns
        .api::<Job>()
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    let name = job.metadata.name.unwrap();
    let made = eventually("the Job controller's PodGroup", 30, || async {
        let list = sources.list(&Default::default()).await.ok()?;
        list.items.into_iter().next().and_then(|g| g.metadata.name)
    })
    .await;
    waits_for_its_queue_s_capability(&groups, &name).await;
    let members: Vec<Pod> = pods.list(&Default::default()).await.unwrap().items;
    assert_eq!(members.len(), 3);
    for p in &members {
        let spec = p.spec.as_ref().unwrap();
        let named = spec
            .scheduling_group
            .as_ref()
            .and_then(|g| g.pod_group_name.clone());
        assert_eq!(
            named.as_ref(),
            Some(&made),
            "the Job controller names its PodGroup"
        );
        assert_eq!(
            p.metadata
                .labels
                .as_ref()
                .unwrap()
                .get(labels::POD_GROUP_LABEL),
            Some(&name),
            "yet the pod joins the Job's gang"
        );
        assert!(spec.node_name.is_none());
    }
    holds_for(
        5,
        "Gangplank making no PodGroup for the Job controller's",
        async || groups.get_opt(&made).await.unwrap().is_none(),
    )
    .await;

    cap_cpu(&cluster, &queue, "96").await;
    bound_eventually("the Job's three pods bound", 60, &pods, &name, 3).await;
    ns.api::<Job>()
        .delete(&name, &DeleteParams::background())
        .await
        .unwrap();
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn lowering_min_count_of_a_waiting_kubernetes_pod_group_lets_it_run_with_the_members_it_has()
{
    let cluster = Cluster::connect().await;
    needs_gate(&cluster, "GenericWorkload");
    // A queue with a capability admits no gang on its first member's arrival: it waits for all.
    let queue = create_queue(&cluster.client, "wl-resize", cpu_cap("64")).await;
    let ns = cluster.namespace("workload-api-resize").await;
    default_queue(&cluster, &ns.name, &queue).await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let sources = upstream(&cluster.client, &ns.name, "PodGroup");
    sources
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "train"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}
            })),
        )
        .await
        .unwrap();
    pod_group_in_phase(&groups, "train", "Pending").await;
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &member(&format!("train-{i}"), "train", 4),
        )
        .await
        .unwrap();
    }
    eventually("the gang to wait for its fourth member", 30, || async {
        let why = not_admitted_because(&groups, "train").await?;
        why.contains("3 of minMember 4 pods exist").then_some(why)
    })
    .await;
    assert!(bound_with_prefix(&pods, "train-").await.is_empty());

    sources
        .patch(
            "train",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}})),
        )
        .await
        .unwrap();
    eventually("Gangplank's PodGroup to follow minCount", 30, || async {
        (groups.get("train").await.ok()?.spec.min_member == 3).then_some(())
    })
    .await;
    bound_eventually("the three members bound", 60, &pods, "train-", 3).await;
    let note = eventually("the PodGroupResized Event", 30, || async {
        events_about(&cluster.client, &ns.name, "train")
            .await
            .remove("PodGroupResized")
    })
    .await;
    assert!(note.starts_with("minMember 4 -> 3"), "{note}");
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pod_whose_priority_differs_from_its_kubernetes_pod_group_s_is_refused_naming_both() {
    let cluster = Cluster::connect().await;
    needs_gate(&cluster, "GenericWorkload");
    high_priority_class(&cluster.client).await;
    let ns = cluster.namespace("workload-api-priority").await;
    default_queue(&cluster, &ns.name, "default").await;
    let pods = ns.api::<Pod>();
    upstream(&cluster.client, &ns.name, "PodGroup")
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "train"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                    "priorityClassName": "gangplank-e2e-high"}
            })),
        )
        .await
        .unwrap();

    // The API server resolves each pod's priority before Gangplank's webhook sees it.
    let mut attempt = 0;
    let why = eventually("a pod of priority 0 refused", 30, || {
        attempt += 1;
        let (pods, name) = (pods.clone(), format!("plain-{attempt}"));
        async move {
            match pods
                .create(&PostParams::default(), &member(&name, "train", 1))
                .await
            {
                Err(kube::Error::Api(status)) => Some(status.message),
                _ => None,
            }
        }
    })
    .await;
    assert!(
        why.contains(
            "spec.priority: 0 (priorityClassName \"\") differs from 1000, the priority of PodGroup"
        ),
        "{why}"
    );
    let mut high = member("high-0", "train", 1);
    high.spec.as_mut().unwrap().priority_class_name = Some("gangplank-e2e-high".into());
    pods.create(&PostParams::default(), &high)
        .await
        .expect("a pod of the PodGroup's priority is admitted");
    ns.delete().await;
}
