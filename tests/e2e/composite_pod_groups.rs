//! Kubernetes' `CompositePodGroup` (`scheduling.k8s.io/v1alpha3`, feature gate
//! `CompositePodGroup`, which `e2e/test` turns on): a disaggregated inference service written
//! as a tree (a Workload, a root needing its three children, a CompositePodGroup of prefill
//! instances and one of decode instances, each instance a PodGroup, and a router PodGroup)
//! through a real API server and the stock scheduler's own tree cycle. Gangplank admits the
//! tree in its queue once its minimum fits and releases all of it; the scheduler places the
//! minimum and whatever whole instances fit, and the rest as room grows; a gang of the same
//! queue takes whole instances beyond the minimum back. Also a multi-slice job, a root needing 2
//! of its 3 slices, whose pods are made before their tree. The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use std::collections::BTreeMap;

use gangplank::api::PodGroup;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::sub_groups::{
    SERVICE, all_whole, bound_instances, every_instance, filler, train_bound_whole,
};
use crate::support::{
    Cluster, TestNamespace, bound_and_staying_with_prefix, default_queue, eventually, holds_for,
};
use crate::workload_api::{member, needs_gate, object, upstream};

/// The namespace's objects of `scheduling.k8s.io/v1alpha3` `kind`.
fn alpha(client: &Client, namespace: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("scheduling.k8s.io", "v1alpha3", kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// How many whole instances of each role are bound, or `None` while an instance is bound in
/// part.
async fn whole_by_role(pods: &Api<Pod>) -> Option<BTreeMap<String, usize>> {
    let bound = bound_instances(pods).await;
    if !all_whole(&bound) {
        return None;
    }
    let mut roles = BTreeMap::new();
    for instance in bound.keys() {
        let role = instance.split('-').nth(1).unwrap();
        *roles.entry(role.to_owned()).or_default() += 1;
    }
    Some(roles)
}

fn roles(counts: [(&str, usize); 3]) -> BTreeMap<String, usize> {
    counts.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect()
}

/// Creates [`SERVICE`] as a controller writing Kubernetes' trees would: the Workload, the
/// root `svc` (its three children needed), `prefill` (2 of its instances) and `decode` (1),
/// each instance a PodGroup `svc-<role>-<i>` of a gang of its members, the router a PodGroup
/// under the root; then every member, naming its instance's PodGroup.
async fn create_tree(cluster: &Cluster, ns: &TestNamespace) {
    let client = &cluster.client;
    let template = |name: &str, min: usize| json!({"name": name, "schedulingPolicy": {"gang": {"minCount": min}}});
    alpha(client, &ns.name, "Workload")
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "Workload",
                "metadata": {"name": "svc"},
                "spec": {"compositePodGroupTemplates": [{
                    "name": "svc", "schedulingPolicy": {"gang": {"minGroupCount": 3}},
                    "compositePodGroupTemplates": [
                        {"name": "prefill", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                         "podGroupTemplates": [template("prefill-instance", 2)]},
                        {"name": "decode", "schedulingPolicy": {"gang": {"minGroupCount": 1}},
                         "podGroupTemplates": [template("decode-instance", 4)]}],
                    "podGroupTemplates": [template("router-instance", 1)]}]}
            })),
        )
        .await
        .unwrap();
    let composites = alpha(client, &ns.name, "CompositePodGroup");
    for (name, parent, min) in [
        ("svc", None, 3),
        ("prefill", Some("svc"), 2),
        ("decode", Some("svc"), 1),
    ] {
        let mut spec = json!({"workloadRef": {"workloadName": "svc", "templateName": name},
            "schedulingPolicy": {"gang": {"minGroupCount": min}}});
        if let Some(parent) = parent {
            spec["parentCompositePodGroupName"] = json!(parent);
        }
        composites
            .create(
                &PostParams::default(),
                &object(json!({"apiVersion": "scheduling.k8s.io/v1alpha3",
                    "kind": "CompositePodGroup", "metadata": {"name": name}, "spec": spec})),
            )
            .await
            .unwrap();
    }
    let leaves = upstream(client, &ns.name, "PodGroup");
    let pods = ns.api::<Pod>();
    for (role, instances, size, cpu) in SERVICE {
        let parent = if role == "router" { "svc" } else { role };
        for i in 0..instances {
            let leaf = format!("svc-{role}-{i}");
            leaves
                .create(
                    &PostParams::default(),
                    &object(
                        json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": leaf},
                        "spec": {"parentCompositePodGroupName": parent,
                            "workloadRef": {"workloadName": "svc",
                                "templateName": format!("{role}-instance")},
                            "schedulingPolicy": {"gang": {"minCount": size}}}}),
                    ),
                )
                .await
                .unwrap();
            for m in 0..size {
                let pod = member(&format!("{leaf}-{m}"), &leaf, cpu);
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        }
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tree_of_composite_pod_groups_starts_at_its_minimum_grows_and_yields_whole_instances() {
    let cluster = Cluster::connect().await;
    needs_gate(&cluster, "CompositePodGroup");
    let ns = cluster.namespace("composite-pod-groups").await;
    // The members name no queue: the namespace's default takes them to Gangplank.
    default_queue(&cluster, &ns.name, "default").await;
    let (groups, pods) = (ns.api::<PodGroup>(), ns.api::<Pod>());
    // One node of the four left: 32 CPUs.
    for name in ["filler-0", "filler-1", "filler-2"] {
        filler(&pods, name, 32).await;
    }
    create_tree(&cluster, &ns).await;
    let tree = eventually("Gangplank's PodGroup for the tree's root", 30, || async {
        groups.get_opt("svc").await.ok().flatten()
    })
    .await;
    let sub_groups: Vec<(String, i32, i32)> = tree
        .spec
        .sub_group_policy
        .iter()
        .map(|p| (p.name.clone(), p.sub_group_size, p.min_sub_groups))
        .collect();
    assert_eq!(
        (tree.spec.min_member, sub_groups),
        (
            9,
            vec![
                ("decode".into(), 4, 1),
                ("prefill".into(), 2, 2),
                ("svc-router-0".into(), 1, 1)
            ]
        ),
        "one gang of the tree: its minimum, a sub-group per child of the root"
    );
    // The minimum (22 CPUs) and two prefill instances more (8) fit the 32; no decode instance
    // more (12): the scheduler picks which instances, each whole.
    let started = roles([("prefill", 4), ("decode", 1), ("router", 1)]);
    eventually(
        "the minimum and two prefill instances more, bound whole",
        90,
        || async { (whole_by_role(&pods).await? == started).then_some(()) },
    )
    .await;
    holds_for(
        5,
        "nothing more bound, and no instance in part",
        async || whole_by_role(&pods).await.as_ref() == Some(&started),
    )
    .await;

    // Room grows by a node: the scheduler starts the other decode instance, whole.
    pods.delete("filler-0", &Default::default()).await.unwrap();
    eventually(
        "every instance bound whole once a node frees",
        90,
        || async { (bound_instances(&pods).await == every_instance()).then_some(()) },
    )
    .await;

    // A gang of the same queue needs 24 CPUs in 6-CPU members, and 20 and 2 are left on the
    // two nodes: instances beyond the minimum yield, whole, and the minimum stays.
    train_bound_whole(&groups, &pods, None).await;
    let left = eventually("the service back to whole instances", 60, || async {
        whole_by_role(&pods).await
    })
    .await;
    let at_least = roles([("prefill", 2), ("decode", 1), ("router", 1)]);
    assert!(
        at_least.iter().all(|(r, n)| left.get(r) >= Some(n)),
        "the minimum stays: {left:?}"
    );
    assert!(
        left.values().sum::<usize>() < every_instance().len(),
        "nothing given back: {left:?}"
    );
    ns.delete().await;
}

/// Members bound (and not being deleted) of each slice `slice-<i>` that has any.
async fn bound_slices(pods: &Api<Pod>) -> BTreeMap<String, usize> {
    let mut slices = BTreeMap::new();
    for name in bound_and_staying_with_prefix(pods, "slice-").await {
        let (slice, _) = name.rsplit_once('-').unwrap();
        *slices.entry(slice.to_owned()).or_default() += 1;
    }
    slices
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_multi_slice_job_made_pods_first_starts_two_slices_whole_and_the_third_when_room_comes() {
    let cluster = Cluster::connect().await;
    needs_gate(&cluster, "CompositePodGroup");
    let ns = cluster.namespace("composite-slices").await;
    default_queue(&cluster, &ns.name, "default").await;
    let pods = ns.api::<Pod>();
    // One node of the four left: 32 CPUs, room for two slices of 12 and not three.
    for name in ["filler-0", "filler-1", "filler-2"] {
        filler(&pods, name, 32).await;
    }
    // A controller may make the pods before their tree: each joins its slice's gang alone
    // until Gangplank sees the slice's PodGroup and parent, then moves into the tree's.
    for (i, m) in (0..3).flat_map(|i| (0..4).map(move |m| (i, m))) {
        let pod = member(&format!("slice-{i}-{m}"), &format!("slice-{i}"), 3);
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let client = &cluster.client;
    alpha(client, &ns.name, "Workload")
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "Workload",
                "metadata": {"name": "train"},
                "spec": {"compositePodGroupTemplates": [{
                    "name": "slices", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                    "podGroupTemplates": [
                        {"name": "slice", "schedulingPolicy": {"gang": {"minCount": 4}}}]}]}
            })),
        )
        .await
        .unwrap();
    alpha(client, &ns.name, "CompositePodGroup")
        .create(
            &PostParams::default(),
            &object(json!({"apiVersion": "scheduling.k8s.io/v1alpha3",
                "kind": "CompositePodGroup", "metadata": {"name": "slices"},
                "spec": {"workloadRef": {"workloadName": "train", "templateName": "slices"},
                    "schedulingPolicy": {"gang": {"minGroupCount": 2}}}})),
        )
        .await
        .unwrap();
    let leaves = upstream(client, &ns.name, "PodGroup");
    for i in 0..3 {
        let slice = format!("slice-{i}");
        leaves
            .create(
                &PostParams::default(),
                &object(
                    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": slice},
                    "spec": {"parentCompositePodGroupName": "slices",
                        "workloadRef": {"workloadName": "train", "templateName": "slice"},
                        "schedulingPolicy": {"gang": {"minCount": 4}}}}),
                ),
            )
            .await
            .unwrap();
    }
    let two_whole =
        |bound: &BTreeMap<String, usize>| bound.len() == 2 && bound.values().all(|&n| n == 4);
    eventually("two slices bound whole", 90, || async {
        two_whole(&bound_slices(&pods).await).then_some(())
    })
    .await;
    holds_for(
        5,
        "two slices whole and no member of the third bound",
        async || two_whole(&bound_slices(&pods).await),
    )
    .await;

    pods.delete("filler-0", &Default::default()).await.unwrap();
    let every = (0..3).map(|i| (format!("slice-{i}"), 4)).collect();
    eventually(
        "the third slice bound whole once a node frees",
        90,
        || async { (bound_slices(&pods).await == every).then_some(()) },
    )
    .await;
    ns.delete().await;
}
