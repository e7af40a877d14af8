//! Conversions from Kubernetes API objects (k8s-openapi) to the cache's model.
//!
//! Kept apart from the model so that the model and the policy code never see API types, and so
//! that the rules for "what a pod requests" live in one tested place.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use gangplank_core::model::quantity::{self, Scale};
use gangplank_core::model::resources::Capability;
use gangplank_core::model::sub_groups::SubGroup;
use gangplank_core::model::{
    DEFAULT_SCHEDULER, GroupKey, Node, Pod, PodGroup, PodPhase, Queue, ResourceId, Resources,
    Taint, TaintEffect, Topology, Workload,
};

use super::Error;
use crate::api;
use crate::api::{labels, leader_worker_set, volcano, workload_api, workloads};

/// Converts a Node. Fails only on a missing name or an unparsable quantity, which the API
/// server never lets through.
pub fn node(node: &core::Node) -> Result<Node, Error> {
    let name = node.metadata.name.clone().ok_or(Error::Convert {
        kind: "node",
        name: String::new(),
        why: "metadata.name is missing".into(),
    })?;
    let allocatable = match node.status.as_ref().and_then(|s| s.allocatable.as_ref()) {
        Some(list) => resources(list).map_err(|why| Error::Convert {
            kind: "node",
            name: name.clone(),
            why,
        })?,
        None => Resources::new(),
    };
    let spec = node.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .map(|taints| taints.iter().map(taint).collect())
        .unwrap_or_default();
    Ok(Node {
        allocatable,
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        not_ready: node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status != "True"),
        name,
    })
}

fn taint(t: &core::Taint) -> Taint {
    Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: match t.effect.as_str() {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            other => TaintEffect::Other(other.to_owned()),
        },
    }
}

/// Converts a Pod.
pub fn pod(pod: &core::Pod) -> Result<Pod, Error> {
    let meta = &pod.metadata;
    let display = format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    );
    let missing = |field: &str| Error::Convert {
        kind: "pod",
        name: display.clone(),
        why: format!("{field} is missing"),
    };
    let uid = meta.uid.clone().ok_or_else(|| missing("metadata.uid"))?;
    let name = meta.name.clone().ok_or_else(|| missing("metadata.name"))?;
    let namespace = meta
        .namespace
        .clone()
        .ok_or_else(|| missing("metadata.namespace"))?;
    let mut requests = match &pod.spec {
        Some(spec) => pod_requests(spec).map_err(|why| Error::Convert {
            kind: "pod",
            name: display.clone(),
            why,
        })?,
        None => Resources::new(),
    };
    let marked = pod
        .spec
        .as_ref()
        .is_some_and(|spec| names_resource(spec, labels::MANAGED_RESOURCE));
    requests = on_node(requests);
    let (pod_labels, pod_annotations) = (meta.labels.as_ref(), meta.annotations.as_ref());
    let leads_a_replica = leader_worker_set::replica_of(pod_labels, pod_annotations)
        .is_some_and(|replica| replica.leader);
    let min_member = labels::gang_size_of(pod_annotations, leads_a_replica)
        .and_then(|(_, size)| u32::try_from(size).ok());
    let workload = workload_of(meta);
    let controller = match (min_member, &workload) {
        (Some(_), None) if leads_a_replica => Some(std::sync::Arc::new(Workload {
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            name: name.clone(),
            uid: uid.clone(),
        })),
        (Some(_), None) => controller_of(meta),
        _ => None,
    };
    let stand_in_for = pod_labels
        .filter(|l| l.get(labels::STAND_IN_LABEL).is_some_and(|v| v == "true"))
        .and_then(|_| pod_annotations?.get(labels::STAND_IN_FOR_ANNOTATION))
        .and_then(|v| v.split_once('/'))
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .map(|(ns, name)| GroupKey::new(ns, name));
    let pod_group = labels::pod_group_of(pod_labels, pod_annotations).map(str::to_owned);
    Ok(Pod {
        uid,
        stand_in_for,
        namespace,
        name,
        node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        phase: PodPhase::of(pod.status.as_ref().and_then(|s| s.phase.as_deref())),
        requests,
        labels: match (&pod_group, pod_labels) {
            (Some(_), Some(l)) => std::sync::Arc::new(l.clone()),
            _ => std::sync::Arc::default(),
        },
        pod_group,
        queue: labels::queue_of(pod_labels, pod_annotations).map(str::to_owned),
        priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
        node_selector: pod
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default(),
        scheduling_gates: pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .map(|gates| gates.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default(),
        admission_recorded: pod_annotations
            .is_some_and(|a| a.contains_key(labels::ADMITTED_ANNOTATION)),
        annotated: pod_annotations.is_some_and(|a| !a.is_empty()),
        created: meta
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
        started: pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_second()),
        leader_worker_set: leads_a_replica
            .then(|| labels::non_empty(pod_labels, leader_worker_set::NAME_LABEL))
            .flatten()
            .map(std::sync::Arc::from),
        min_member,
        deleting: meta.deletion_timestamp.is_some(),
        disrupted: pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
            }),
        marked,
        workload,
        controller,
        scheduler: pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .filter(|n| !n.is_empty() && *n != DEFAULT_SCHEDULER)
            .map(std::sync::Arc::from),
    })
}

/// The workload the pod belongs to, when Gangplank groups pods by its kind ([`workloads::of`]).
fn workload_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<std::sync::Arc<Workload>> {
    let owner = workloads::of(meta)?;
    Some(std::sync::Arc::new(Workload {
        api_version: owner.api_version,
        kind: owner.kind.kind.to_owned(),
        name: owner.name,
        uid: owner.uid,
    }))
}

/// The pod's controller, as its ownerReference names it.
fn controller_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<std::sync::Arc<Workload>> {
    let owner = api::controller(meta)?;
    Some(std::sync::Arc::new(Workload {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
    }))
}

/// Converts a Topology: its name and levels' label keys, widest first.
pub fn topology(topology: &api::Topology) -> Topology {
    Topology {
        name: topology.metadata.name.clone().unwrap_or_default(),
        levels: topology
            .spec
            .levels
            .iter()
            .map(|l| l.node_label.clone())
            .collect(),
    }
}

/// Converts a PodGroup. A `minMember` below 1 (refused by the CRD schema) counts as 1.
pub fn pod_group(group: &api::PodGroup) -> Result<PodGroup, Error> {
    let meta = &group.metadata;
    let name = meta.name.clone().unwrap_or_default();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let spec = &group.spec;
    let min_resources = requested(&spec.min_resources).map_err(|why| Error::Convert {
        kind: "podgroup",
        name: format!("{namespace}/{name}"),
        why,
    })?;
    Ok(PodGroup {
        key: GroupKey::new(namespace, name),
        min_member: spec.min_member.max(1).unsigned_abs(),
        max_member: spec.max_member.map(|m| m.max(1).unsigned_abs()),
        queue: spec.queue_name().to_owned(),
        schedule_timeout: spec.schedule_timeout(),
        min_resources,
        max_wait: seconds(spec.max_wait_seconds),
        expected_runtime: seconds(spec.expected_runtime_seconds),
        topology_key: spec.topology_key.clone().filter(|k| !k.is_empty()),
        preferred_topology_key: spec
            .preferred_topology_key
            .clone()
            .filter(|k| !k.is_empty()),
        placed_whole_by_scheduler: spec.min_member > 1 && workload_api::made_for_upstream(group),
        ahead: group.admitted_ahead_of_members(),
        in_stages: group.members_in_stages(),
        admitted_at: volcano::admitted_ahead_at(group),
        sub_groups: spec.sub_group_policy.iter().map(sub_group).collect(),
        created: meta
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
    })
}

/// Converts one sub-group of a PodGroup's `subGroupPolicy`; the webhook refuses what this
/// cannot carry (`matchExpressions`, sizes below 1).
fn sub_group(policy: &api::pod_group::SubGroupPolicy) -> SubGroup {
    SubGroup {
        name: policy.name.clone(),
        size: policy.sub_group_size.max(1).unsigned_abs(),
        min_count: policy.min_sub_groups.max(1).unsigned_abs(),
        selector: policy
            .label_selector
            .as_ref()
            .and_then(|s| s.match_labels.clone())
            .unwrap_or_default(),
        match_label_keys: policy.match_label_keys.clone(),
        topology_key: policy.topology_key.clone(),
    }
}

/// Converts a Queue. Its quantities are read by the same parser as every other quantity, so a
/// capability means the same thing to admission, the controller and the shares.
pub fn queue(queue: &api::Queue) -> Result<Queue, Error> {
    let name = queue.metadata.name.clone().unwrap_or_default();
    let spec = &queue.spec;
    let mut guarantee = Resources::new();
    for (resource, amount) in queue_quantities(&name, "guarantee", &spec.guarantee)? {
        guarantee.set(resource, amount);
    }
    let mut capability = Capability::unbounded();
    for (resource, amount) in queue_quantities(&name, "capability", &spec.capability)? {
        capability.set(resource, amount);
    }
    Ok(Queue {
        weight: spec.weight.max(1) as u32,
        capability,
        guarantee,
        parent: spec.parent.clone(),
        priority: spec.priority,
        open: spec.state == api::QueueState::Open,
        reclaimable: spec.reclaimable,
        max_wait: seconds(spec.max_wait_seconds),
        namespace_fair_share: spec.namespace_fair_share,
        name,
    })
}

/// The amounts of a Queue's `field`, or an error naming the field and the resource.
fn queue_quantities<'l>(
    queue: &str,
    field: &str,
    list: &'l api::ResourceList,
) -> Result<Vec<(&'l str, i64)>, Error> {
    list.iter()
        .map(|(resource, q)| {
            quantity::parse(&q.0, Scale::for_resource(resource))
                .map(|amount| (resource.as_str(), amount))
                .map_err(|e| Error::Convert {
                    kind: "queue",
                    name: queue.to_owned(),
                    why: format!("{field}.{resource}: {e}"),
                })
        })
        .collect()
}

/// A duration field in whole seconds; absent or not positive (refused by the CRD schema) is
/// unset.
fn seconds(value: Option<i32>) -> Option<std::time::Duration> {
    value
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s.unsigned_abs().into()))
}

/// What every pod of a workload whose pods come one group after another asks, in all (each
/// pod spec, as JSON, with how many pods are made from it): its `minResources`, so that
/// admission keeps room for the later pods while the first run.
pub fn stage_requests(stages: &[(u32, &serde_json::Value)]) -> Result<Resources, String> {
    let mut total = Resources::new();
    for (pods, spec) in stages {
        let spec: core::PodSpec =
            serde_json::from_value((*spec).clone()).map_err(|e| e.to_string())?;
        for (name, amount) in pod_requests(&spec)?.iter() {
            total.set(
                name,
                total
                    .get(name)
                    .saturating_add(amount.saturating_mul((*pods).into())),
            );
        }
    }
    Ok(total)
}

/// What the scheduler reserves for a pod, computed like upstream's `PodRequests`:
/// - the sum of the app containers' requests;
/// - init containers run one at a time before them, so the pod needs, per resource, the
///   maximum of that sum and each init container's request; a sidecar (an init container with
///   `restartPolicy: Always`) keeps running, so it is added to the sum and to every init
///   container started after it;
/// - pod-level requests (`spec.resources`) replace the container total for the resources they
///   name (cpu, memory, hugepages);
/// - plus `spec.overhead` (RuntimeClass overhead).
pub fn pod_requests(spec: &core::PodSpec) -> Result<Resources, String> {
    let mut total = Resources::new();
    for c in &spec.containers {
        total.add(&container_requests(c)?);
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for c in spec.init_containers.iter().flatten() {
        let mut reqs = container_requests(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            total.add(&reqs);
            sidecars.add(&reqs);
            reqs = sidecars.clone();
        } else {
            reqs.add(&sidecars);
        }
        init_peak.max_with(&reqs);
    }
    total.max_with(&init_peak);

    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (name, amount) in requested(pod_level)?.iter() {
            if name == "cpu" || name == "memory" || name.starts_with("hugepages-") {
                total.set(name, amount);
            }
        }
    }
    if let Some(overhead) = &spec.overhead {
        total.add(&requested(overhead)?);
    }
    Ok(total)
}

/// Whether a container or init container of `spec` names `resource` in its requests or limits,
/// whatever the amount: how the scheduler decides that an extender manages a pod. The webhook
/// gives the markers zero units (see [`crate::webhooks::pods`]).
fn names_resource(spec: &core::PodSpec, resource: &str) -> bool {
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    containers
        .filter_map(|c| c.resources.as_ref())
        .flat_map(|r| [&r.requests, &r.limits])
        .any(|list| list.as_ref().is_some_and(|l| l.contains_key(resource)))
}

/// `requests` as they count against a node: plus one of its `pods` slots, and without the
/// marker resources, which are cluster-level: no node advertises them and the scheduler
/// ignores them (`ignoredByScheduler`).
pub fn on_node(mut requests: Resources) -> Resources {
    requests.set_amount(ResourceId::PODS, 1);
    requests.set_amount(ResourceId::MANAGED, 0);
    requests.set_amount(ResourceId::PLACEMENT, 0);
    requests
}

fn container_requests(c: &core::Container) -> Result<Resources, String> {
    match c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        Some(list) => requested(list),
        None => Ok(Resources::new()),
    }
}

/// Converts a ResourceList that a node or a Queue gives, each amount in the scale of its
/// resource.
pub fn resources(list: &BTreeMap<String, Quantity>) -> Result<Resources, String> {
    amounts(list, Resources::set)
}

/// Converts a ResourceList that a pod or a PodGroup asks for: its names take a slot of the
/// resource-name table only while it has room for them
/// ([`gangplank_core::model::ResourceId::requested`]).
pub fn requested(list: &BTreeMap<String, Quantity>) -> Result<Resources, String> {
    amounts(list, Resources::set_requested)
}

fn amounts(
    list: &BTreeMap<String, Quantity>,
    set: fn(&mut Resources, &str, i64),
) -> Result<Resources, String> {
    let mut out = Resources::new();
    for (name, q) in list {
        let amount =
            quantity::parse(&q.0, Scale::for_resource(name)).map_err(|e| format!("{name}: {e}"))?;
        set(&mut out, name, amount);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};

    fn list(entries: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    fn container(requests: &[(&str, &str)]) -> Container {
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: Some(list(requests)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn sidecar(requests: &[(&str, &str)]) -> Container {
        Container {
            restart_policy: Some("Always".into()),
            ..container(requests)
        }
    }

    #[test]
    fn app_container_requests_are_summed() {
        let spec = PodSpec {
            containers: vec![
                container(&[("cpu", "500m"), ("memory", "1Gi")]),
                container(&[("cpu", "250m"), ("nvidia.com/gpu", "1")]),
            ],
            ..Default::default()
        };
        assert_eq!(
            pod_requests(&spec).unwrap(),
            Resources::from([("cpu", 750), ("memory", 1 << 30), ("nvidia.com/gpu", 1)])
        );
    }

    #[test]
    fn a_pod_is_marked_by_the_marker_s_name_at_any_amount_as_the_scheduler_picks_extenders() {
        let marker = labels::MANAGED_RESOURCE;
        let at_zero = PodSpec {
            containers: vec![container(&[("cpu", "1"), (marker, "0")])],
            ..Default::default()
        };
        assert!(names_resource(&at_zero, marker));
        assert_eq!(
            pod_requests(&at_zero).unwrap(),
            Resources::from([("cpu", 1_000)])
        );

        let init_limit_only = PodSpec {
            containers: vec![container(&[("cpu", "1")])],
            init_containers: Some(vec![Container {
                name: "init".into(),
                resources: Some(ResourceRequirements {
                    limits: Some(list(&[(marker, "1")])),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert!(names_resource(&init_limit_only, marker));

        let unmarked = PodSpec {
            containers: vec![container(&[
                ("cpu", "1"),
                (labels::PLACEMENT_RESOURCE, "0"),
            ])],
            ..Default::default()
        };
        assert!(!names_resource(&unmarked, marker));
    }

    #[test]
    fn the_largest_init_container_wins_over_a_smaller_sum() {
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "100m"), ("memory", "2Gi")])],
            init_containers: Some(vec![
                container(&[("cpu", "2")]),
                container(&[("cpu", "1"), ("memory", "1Gi")]),
            ]),
            ..Default::default()
        };
        assert_eq!(
            pod_requests(&spec).unwrap(),
            Resources::from([("cpu", 2_000), ("memory", 2 << 30)])
        );
    }

    #[test]
    fn sidecars_add_to_the_app_containers_and_to_later_init_containers() {
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "1")])],
            init_containers: Some(vec![
                sidecar(&[("cpu", "200m")]),
                container(&[("cpu", "1500m")]),
            ]),
            ..Default::default()
        };
        // App phase: 1 + 0.2 = 1.2; init phase: 1.5 + 0.2 sidecar = 1.7.
        assert_eq!(
            pod_requests(&spec).unwrap(),
            Resources::from([("cpu", 1_700)])
        );
    }

    #[test]
    fn overhead_is_added_and_pod_level_requests_replace_cpu_and_memory() {
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "1")])],
            resources: Some(ResourceRequirements {
                requests: Some(list(&[("cpu", "4"), ("memory", "8Gi")])),
                ..Default::default()
            }),
            overhead: Some(list(&[("cpu", "100m"), ("memory", "64Mi")])),
            ..Default::default()
        };
        assert_eq!(
            pod_requests(&spec).unwrap(),
            Resources::from([
                ("cpu", 4_100),
                ("memory", (8 << 30) + (64 << 20)),
                ("pods", 1)
            ])
        );
    }

    #[test]
    fn an_evicted_pod_is_disrupted_and_one_that_failed_by_itself_is_not() {
        let failed = |conditions: serde_json::Value| -> Pod {
            let k8s: core::Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
                "spec": {"containers": [{"name": "c"}]},
                "status": {"phase": "Failed", "conditions": conditions}
            }))
            .unwrap();
            pod(&k8s).unwrap()
        };
        let evicted = serde_json::json!([{"type": "DisruptionTarget", "status": "True",
            "reason": "EvictionByEvictionAPI"}]);
        assert!(failed(evicted).disrupted);
        assert!(!failed(serde_json::json!([{"type": "Ready", "status": "False"}])).disrupted);
        assert!(
            !failed(serde_json::json!([{"type": "DisruptionTarget", "status": "False"}])).disrupted
        );
    }

    #[test]
    fn a_pod_without_requests_requests_nothing() {
        let spec = PodSpec {
            containers: vec![Container {
                name: "c".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(pod_requests(&spec).unwrap().is_empty());
    }

    #[test]
    fn a_pod_keeps_its_identity_placement_group_queue_and_priority() {
        let k8s: core::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "worker-0", "namespace": "ml", "uid": "u-1",
                "labels": {(labels::POD_GROUP_LABEL): "train", (labels::QUEUE_LABEL): "research"}
            },
            "spec": {
                "nodeName": "n1", "priority": 1000,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]
            },
            "status": {"phase": "Running"}
        }))
        .unwrap();
        assert_eq!(
            pod(&k8s).unwrap(),
            Pod {
                uid: "u-1".into(),
                namespace: "ml".into(),
                name: "worker-0".into(),
                node_name: Some("n1".into()),
                phase: PodPhase::Running,
                requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
                pod_group: Some("train".into()),
                queue: Some("research".into()),
                priority: 1000,
                labels: std::sync::Arc::new(BTreeMap::from([
                    (labels::POD_GROUP_LABEL.to_owned(), "train".to_owned()),
                    (labels::QUEUE_LABEL.to_owned(), "research".to_owned()),
                ])),
                ..Default::default()
            }
        );
    }

    #[test]
    fn a_pod_asking_for_a_gang_size_keeps_it_and_a_bad_one_is_ignored() {
        let with = |value: &str| {
            let k8s: core::Pod = serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": "w", "namespace": "ml", "uid": "u",
                    "annotations": {(labels::MIN_MEMBER_ANNOTATION): value}
                },
                "spec": {"containers": []}
            }))
            .unwrap();
            pod(&k8s).unwrap().min_member
        };
        assert_eq!(with("4"), Some(4));
        assert_eq!(with(" 4 "), Some(4));
        assert_eq!(with("0"), None);
        assert_eq!(with("four"), None);
    }

    #[test]
    fn a_leader_worker_set_replica_s_leader_gives_its_size_and_owns_its_group() {
        let member = |name: &str, index: &str| -> core::Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": name, "namespace": "ml", "uid": format!("{name}-uid"),
                    "labels": {(leader_worker_set::GROUP_KEY_LABEL): "k1",
                        (leader_worker_set::WORKER_INDEX_LABEL): index,
                        (labels::QUEUE_LABEL): "research"},
                    "annotations": {(leader_worker_set::SIZE_ANNOTATION): "4"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                        "name": name, "uid": "sts", "controller": true}]
                },
                "spec": {"containers": []}
            }))
            .unwrap()
        };
        let leader = pod(&member("lws-0", "0")).unwrap();
        assert_eq!(leader.pod_group.as_deref(), Some("k1"));
        assert_eq!(leader.min_member, Some(4));
        let owner = leader.controller.unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Pod", "lws-0", "lws-0-uid")
        );
        let worker = pod(&member("lws-0-1", "1")).unwrap();
        assert_eq!(worker.pod_group.as_deref(), Some("k1"));
        assert_eq!((worker.min_member, worker.controller), (None, None));
    }

    #[test]
    fn a_gang_made_for_a_kubernetes_pod_group_is_placed_whole_by_the_scheduler() {
        let group = |owner_api: &str, min_member: i32| -> api::PodGroup {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "train", "namespace": "ml", "ownerReferences": [
                    {"apiVersion": owner_api, "kind": "PodGroup", "name": "train", "uid": "u",
                     "controller": true}]},
                "spec": {"minMember": min_member}}))
            .unwrap()
        };
        let placed = |g: &api::PodGroup| pod_group(g).unwrap().placed_whole_by_scheduler;
        assert!(placed(&group("scheduling.k8s.io/v1beta1", 4)));
        assert!(placed(&group("scheduling.k8s.io/v1alpha2", 4)));
        assert!(
            !placed(&group("scheduling.k8s.io/v1beta1", 1)),
            "a basic one"
        );
        assert!(
            !placed(&group("scheduling.x-k8s.io/v1alpha1", 4)),
            "scheduler-plugins'"
        );
    }

    #[test]
    fn a_node_keeps_allocatable_labels_taints_and_cordon() {
        let k8s: core::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {
                "unschedulable": true,
                "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
            },
            "status": {"allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"}}
        }))
        .unwrap();
        assert_eq!(
            node(&k8s).unwrap(),
            Node {
                name: "n1".into(),
                allocatable: Resources::from([("cpu", 3_920), ("memory", 15 << 30), ("pods", 110)]),
                labels: [("zone".to_string(), "a".to_string())].into(),
                taints: vec![Taint {
                    key: "gpu".into(),
                    value: Some("true".into()),
                    effect: TaintEffect::NoSchedule
                }],
                unschedulable: true,
                not_ready: false,
            }
        );
    }

    #[test]
    fn a_node_whose_ready_condition_is_not_true_is_not_ready_and_takes_no_new_pods() {
        let with_ready = |status: &str| {
            let k8s: core::Node = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "4"},
                    "conditions": [{"type": "Ready", "status": status}]}
            }))
            .unwrap();
            node(&k8s).unwrap()
        };
        assert!(with_ready("True").takes_new_pods());
        for status in ["False", "Unknown"] {
            let n = with_ready(status);
            assert!(n.not_ready && !n.takes_new_pods(), "Ready={status}");
        }
    }

    #[test]
    fn node_condition_taints_keep_new_pods_off_and_other_taints_do_not() {
        let tainted = |key: &str, effect: TaintEffect| Node {
            name: "n1".into(),
            taints: vec![Taint {
                key: key.into(),
                value: None,
                effect,
            }],
            ..Node::default()
        };
        assert!(
            !tainted("node.kubernetes.io/unreachable", TaintEffect::NoExecute).takes_new_pods()
        );
        assert!(!tainted("node.kubernetes.io/not-ready", TaintEffect::NoSchedule).takes_new_pods());
        assert!(
            tainted(
                "node.kubernetes.io/not-ready",
                TaintEffect::PreferNoSchedule
            )
            .takes_new_pods()
        );
        assert!(tainted("nvidia.com/gpu", TaintEffect::NoSchedule).takes_new_pods());
        let cordoned = Node {
            unschedulable: true,
            ..Node::default()
        };
        assert!(!cordoned.takes_new_pods());
    }

    #[test]
    fn a_stand_in_names_its_gang_only_with_both_its_label_and_its_annotation() {
        let of = |labels: serde_json::Value, annotations: serde_json::Value| {
            let k8s: core::Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "s", "namespace": "gangplank-system", "uid": "u",
                    "labels": labels, "annotations": annotations},
            }))
            .unwrap();
            pod(&k8s).unwrap().stand_in_for
        };
        let label = serde_json::json!({(labels::STAND_IN_LABEL): "true"});
        let annotation = serde_json::json!({(labels::STAND_IN_FOR_ANNOTATION): "team-a/train"});
        assert_eq!(
            of(label.clone(), annotation.clone()),
            Some(GroupKey::new("team-a", "train"))
        );
        assert_eq!(of(serde_json::json!({}), annotation), None);
        assert_eq!(
            of(
                label,
                serde_json::json!({(labels::STAND_IN_FOR_ANNOTATION): "no-slash"})
            ),
            None
        );
    }

    #[test]
    fn a_bad_quantity_names_the_object_and_the_resource() {
        let k8s: core::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "lots"}}
        }))
        .unwrap();
        assert_eq!(
            node(&k8s).unwrap_err().to_string(),
            "failed to convert node n1: cpu: failed to parse quantity \"lots\": unknown suffix \"lots\""
        );
    }

    #[test]
    fn a_queue_keeps_its_weight_parent_guarantee_and_capability_with_explicit_zero_bounds() {
        let q: api::Queue = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "vision"},
            "spec": {
                "weight": 3,
                "parent": "research",
                "guarantee": {"cpu": "1500m", "memory": "4Gi"},
                "capability": {"cpu": 8, "nvidia.com/gpu": 0},
            },
        }))
        .unwrap();
        let q = queue(&q).unwrap();
        assert_eq!(q.name, "vision");
        assert_eq!(q.parent.as_deref(), Some("research"));
        assert_eq!(q.weight, 3);
        assert_eq!(
            q.guarantee,
            Resources::from([("cpu", 1_500), ("memory", 4 << 30)])
        );
        assert_eq!(q.capability.limit(ResourceId::CPU), Some(8_000));
        assert_eq!(q.capability.limit(ResourceId::GPU), Some(0));
        assert_eq!(q.capability.limit(ResourceId::MEMORY), None);
    }

    #[test]
    fn a_queue_with_a_bad_quantity_is_refused_naming_the_queue_field_and_resource() {
        let mut q = api::Queue::new("team", api::QueueSpec::default());
        q.spec
            .capability
            .insert("memory".into(), Quantity("lots".into()));
        let err = queue(&q).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to convert queue team: capability.memory: "),
            "{err}"
        );
    }
}
