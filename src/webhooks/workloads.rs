//! Workloads of the kinds Gangplank groups by (`crate::api::workloads`: Kubeflow's training
//! jobs and MPIJob, KubeRay's RayCluster, JobSet, spark-operator's SparkApplication) that name a
//! queue: their pod templates get that queue, so that their pods come to the pod webhook and
//! join the workload's group even in a namespace without a default queue. Their operators copy
//! a template's labels onto the pods they make from it, but not the workload's own labels.
//!
//! **Mutation** (CREATE; the operators make pods from the templates as they are later): a
//! workload naming its queue like a Job does ([`labels::queue_of`] on its metadata) gets, on
//! the metadata of each pod template of its kind ([`workloads::Kind::pod_metadata`]), the label
//! `scheduling.gangplank.dev/queue: <queue>`, unless the template names a group or a queue
//! already (the user decided). Refused: a queue name that cannot name a Queue, a queue that does
//! not exist or is Closed, each naming the workload's field, a pod template, its metadata or
//! its labels that is not an object (the kind's schema refuses those too, after the webhooks),
//! and an annotation `scheduling.gangplank.dev/min-replicas` that does not fit the workload's
//! spec (`crate::api::min_replicas`). A LeaderWorkerSet with that annotation also gets the label
//! `scheduling.gangplank.dev/pod-group: <its name>` on each pod template that names no group,
//! so that its replicas' pods are one gang ([`workloads::Kind::named_by_group_label`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use serde_json::json;

use super::patch::Patcher;
use super::queues::check_open;
use super::review::{Denial, Verdict};
use super::{Webhooks, name_problem, queue_field};
use crate::api::min_replicas::Problem;
use crate::api::{labels, workloads};

/// `POST /webhooks/mutate/workloads`.
pub fn mutate(w: &Webhooks, request: &AdmissionRequest<DynamicObject>) -> Result<Verdict, Denial> {
    if request.operation != Operation::Create {
        return Ok(Verdict::allow());
    }
    let object = request.object.as_ref().expect("checked when decoded");
    let gvk = &request.kind;
    let api_version = format!("{}/{}", gvk.group, gvk.version);
    let Some(kind) = workloads::kind_of(&api_version, &gvk.kind) else {
        return Ok(Verdict::allow());
    };
    let meta = &object.metadata;
    let group = match kind.tree(meta, &object.data) {
        Some(Err(problem)) => return Err(Denial::invalid(Problem::field(), problem)),
        Some(Ok(_)) if kind.named_by_group_label() => Some(named(meta)?),
        _ => None,
    };
    let Some(queue) = labels::queue_of(meta.labels.as_ref(), meta.annotations.as_ref()) else {
        return Ok(Verdict::allow());
    };
    let field = queue_field(meta);
    if let Some(problem) = name_problem(queue) {
        return Err(Denial::invalid(field, problem));
    }
    let namespace = request.namespace.as_deref().unwrap_or_default();
    check_open(w.lookup(), queue, namespace, &field)?;

    let mut patch = Patcher::new(object);
    for metadata in kind.pod_metadata(patch.doc()) {
        let at = |tail: &[&'static str]| -> Vec<String> {
            metadata
                .iter()
                .cloned()
                .chain(tail.iter().map(|k| (*k).to_owned()))
                .collect()
        };
        let labels_path = at(&["labels"]);
        let labels_path: Vec<&str> = labels_path.iter().map(String::as_str).collect();
        if let Some(field) = not_an_object(patch.doc(), &labels_path) {
            return Err(Denial::invalid(field, "must be an object".to_owned()));
        }
        let path = at(&[]);
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        let template_meta: ObjectMeta = patch
            .get(&path)
            .and_then(|m| serde_json::from_value(m.clone()).ok())
            .unwrap_or_default();
        let (template_labels, template_annotations) = (
            template_meta.labels.as_ref(),
            template_meta.annotations.as_ref(),
        );
        let grouped = labels::pod_group_of(template_labels, template_annotations).is_some();
        let decided = grouped || labels::queue_of(template_labels, template_annotations).is_some();
        let mut label = |key: &'static str, value: &str| {
            let path = at(&["labels", key]);
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            patch.set(&path, json!(value));
        };
        if !decided {
            label(labels::QUEUE_LABEL, queue);
        }
        if let Some(group) = group.filter(|_| !grouped) {
            label(labels::POD_GROUP_LABEL, group);
        }
    }
    Ok(Verdict::patch(patch.into_patch()))
}

/// The name of a workload whose pods are named into its group by label: a LeaderWorkerSet
/// created with `generateName` has none yet, and is refused.
fn named(meta: &ObjectMeta) -> Result<&str, Denial> {
    meta.name.as_deref().filter(|n| !n.is_empty()).ok_or_else(|| {
        Denial::invalid(
            "metadata.name",
            format!(
                "a workload annotated {} needs a name, not generateName: its pods' group is named after it",
                labels::MIN_REPLICAS_ANNOTATION
            ),
        )
    })
}

/// The first value along `path` (from the root of `doc`) that is there but is not a JSON object
/// (or, before an index, an array), as a field path; `None` when every value is an object or
/// missing (or null), so that the labels can be added there.
fn not_an_object(doc: &serde_json::Value, path: &[&str]) -> Option<String> {
    let mut value = doc;
    for (depth, key) in path.iter().enumerate() {
        let next = match value {
            serde_json::Value::Object(map) => map.get(*key),
            serde_json::Value::Array(items) if key.parse::<usize>().is_ok() => {
                key.parse::<usize>().ok().and_then(|i| items.get(i))
            }
            _ => return Some(path[..depth].join(".")),
        };
        match next {
            None | Some(serde_json::Value::Null) => return None,
            Some(v) => value = v,
        }
    }
    (!value.is_object()).then(|| path.join("."))
}
