//! `gangplank groups`: PodGroups with their phase, members placed of `minMember`, queue, age
//! and, when they wait or failed, the condition that says why; `gangplank jobs`: the same for
//! the groups a workload owns, named by that workload (`Job/train`, `JobSet/llm`), with the
//! Jobs each batch Job starts after (`spec.dependsOn`), and batch Jobs that have no group yet
//! (waiting for those) from their own status.

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;

use super::render::{age, table};
use super::{GroupsArgs, client, print, repeat};
use crate::api::PodGroup;
use crate::api::batch_job::BatchJob;
use crate::controller::status::{ADMITTED, FAILED, SCHEDULED};

/// One group as the command shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupRow {
    pub namespace: String,
    pub name: String,
    pub queue: String,
    pub phase: String,
    /// Members bound to a node.
    pub placed: i32,
    pub min_member: i32,
    pub age_seconds: i64,
    /// The condition that says why it waits or failed: `Reason: message`.
    pub why: Option<String>,
    /// The object that controls the group, as `Kind/name` (a Job, a JobSet, an operator's
    /// PodGroup); none for a PodGroup written by hand.
    pub owner: Option<String>,
    /// For a batch Job's group: the Jobs it starts after (`spec.dependsOn`), comma separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// The condition of `group` that explains it, if one does: a failure, else a refused
/// admission, else a gang not placed yet.
pub fn why(group: &PodGroup) -> Option<String> {
    let conditions = group.status.as_ref()?.conditions.as_slice();
    let find = |type_: &str, status: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
    };
    let condition = find(FAILED, "True")
        .or_else(|| find(ADMITTED, "False"))
        .or_else(|| find(SCHEDULED, "False"))?;
    Some(format!("{}: {}", condition.reason, condition.message))
}

pub fn view(group: &PodGroup, now: Timestamp) -> GroupRow {
    let status = group.status.clone().unwrap_or_default();
    let created = group
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    GroupRow {
        namespace: group.metadata.namespace.clone().unwrap_or_default(),
        name: group.metadata.name.clone().unwrap_or_default(),
        queue: group.spec.queue_name().to_owned(),
        phase: format!("{:?}", status.phase),
        placed: status.scheduled,
        min_member: group.spec.min_member,
        age_seconds: now.as_second() - created.as_second(),
        why: why(group),
        owner: crate::api::controller(&group.metadata).map(|o| format!("{}/{}", o.kind, o.name)),
        after: None,
    }
}

/// The Jobs `job` starts after, comma separated, with `any` when one of them is enough.
fn after(job: &BatchJob) -> Option<String> {
    let depends = job
        .spec
        .depends_on
        .as_ref()
        .filter(|d| !d.name.is_empty())?;
    let names = depends.name.join(",");
    Some(if depends.iteration.as_deref() == Some("any") {
        format!("any of {names}")
    } else {
        names
    })
}

/// A batch Job that has no PodGroup (yet), from its own status.
pub fn job_view(job: &BatchJob, now: Timestamp) -> GroupRow {
    let status = job.status.clone().unwrap_or_default();
    let created = job
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let name = job.metadata.name.clone().unwrap_or_default();
    GroupRow {
        namespace: job.metadata.namespace.clone().unwrap_or_default(),
        name: name.clone(),
        queue: job.spec.queue.clone().unwrap_or_default(),
        phase: status.state.phase.as_str().to_owned(),
        placed: 0,
        min_member: job.spec.gang_size(),
        age_seconds: now.as_second() - created.as_second(),
        why: (!status.state.reason.is_empty())
            .then(|| format!("{}: {}", status.state.reason, status.state.message)),
        owner: Some(format!("Job/{name}")),
        after: after(job),
    }
}

/// `views` of groups with the batch Jobs of `jobs`: each Job's `after` on its group's row, and a
/// row of its own for a Job whose group is not among them.
pub fn with_jobs(mut views: Vec<GroupRow>, jobs: &[BatchJob], now: Timestamp) -> Vec<GroupRow> {
    for job in jobs {
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let owner = format!("Job/{}", job.metadata.name.as_deref().unwrap_or_default());
        match views
            .iter_mut()
            .find(|v| v.namespace == namespace && v.owner.as_ref() == Some(&owner))
        {
            Some(view) => view.after = after(job),
            None => views.push(job_view(job, now)),
        }
    }
    views.sort_by(|a, b| (&a.namespace, &a.owner, &a.name).cmp(&(&b.namespace, &b.owner, &b.name)));
    views
}

/// The table of `views`: a namespace column with `all_namespaces`, and the first column the
/// group's name, or with `by_owner` its owner's.
pub fn render(views: &[GroupRow], all_namespaces: bool, by_owner: bool) -> String {
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            let first = match (&v.owner, by_owner) {
                (Some(owner), true) => owner.clone(),
                _ => v.name.clone(),
            };
            let mut row = vec![
                first,
                v.queue.clone(),
                v.phase.clone(),
                format!("{}/{}", v.placed, v.min_member),
                age(v.age_seconds),
                v.why.clone().unwrap_or_default(),
            ];
            if by_owner {
                row.insert(5, v.after.clone().unwrap_or_default());
            }
            if all_namespaces {
                row.insert(0, v.namespace.clone());
            }
            row
        })
        .collect();
    let first = if by_owner { "WORKLOAD" } else { "NAME" };
    let mut headers = vec![first, "QUEUE", "PHASE", "PLACED", "AGE", "WHY"];
    if by_owner {
        headers.insert(5, "AFTER");
    }
    if all_namespaces {
        headers.insert(0, "NAMESPACE");
    }
    table(&headers, &rows)
}

pub async fn run(args: GroupsArgs) -> anyhow::Result<()> {
    list(args, false).await
}

pub async fn run_jobs(args: GroupsArgs) -> anyhow::Result<()> {
    list(args, true).await
}

/// Lists the groups, or with `jobs` only those a workload owns, by that workload.
async fn list(args: GroupsArgs, jobs: bool) -> anyhow::Result<()> {
    let (client, default_namespace) = client(args.common.context.as_deref()).await?;
    let (api, batch_jobs): (Api<PodGroup>, Api<BatchJob>) = if args.all_namespaces {
        (Api::all(client.clone()), Api::all(client))
    } else {
        let namespace = args.namespace.unwrap_or(default_namespace);
        (
            Api::namespaced(client.clone(), &namespace),
            Api::namespaced(client, &namespace),
        )
    };
    repeat(args.watch, || async {
        let mut groups = api.list(&ListParams::default()).await?.items;
        groups.sort_by_key(|g| (g.metadata.namespace.clone(), g.metadata.name.clone()));
        let now = Timestamp::now();
        let mut views: Vec<GroupRow> = groups
            .iter()
            .map(|g| view(g, now))
            .filter(|v| !jobs || v.owner.is_some())
            .collect();
        if jobs {
            views = with_jobs(
                views,
                &batch_jobs.list(&ListParams::default()).await?.items,
                now,
            );
        }
        print(args.common.output, &views, || {
            render(&views, args.all_namespaces, jobs)
        });
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_waiting_group_says_why_in_its_row() {
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml",
                "creationTimestamp": "2026-11-26T10:00:00Z"},
            "spec": {"minMember": 4, "queue": "research"},
            "status": {"phase": "Pending", "scheduled": 0, "conditions": [
                {"type": "Admitted", "status": "False", "reason": "WaitingForAdmission",
                 "message": "does not fit now: 4 pods of {cpu: 32}; only 3 fit",
                 "lastTransitionTime": "2026-11-26T10:00:01Z"}]}
        }))
        .unwrap();
        let now: Timestamp = "2026-11-26T10:05:00Z".parse().unwrap();
        let views = [view(&group, now)];
        assert_eq!(
            render(&views, true, false),
            "NAMESPACE  NAME   QUEUE     PHASE    PLACED  AGE  WHY\n\
             ml         train  research  Pending  0/4     5m   WaitingForAdmission: does not fit now: 4 pods of {cpu: 32}; only 3 fit\n"
        );
    }

    #[test]
    fn jobs_are_named_by_the_workload_that_owns_their_group() {
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml",
                "creationTimestamp": "2026-11-26T10:00:00Z",
                "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                    "name": "train", "uid": "u1", "controller": true}]},
            "spec": {"minMember": 4, "queue": "research"},
            "status": {"phase": "Running", "scheduled": 4}
        }))
        .unwrap();
        let now: Timestamp = "2026-11-26T12:00:00Z".parse().unwrap();
        assert_eq!(
            render(&[view(&group, now)], false, true),
            "WORKLOAD      QUEUE     PHASE    PLACED  AGE  AFTER  WHY\n\
             JobSet/train  research  Running  4/4     2h\n"
        );
    }

    #[test]
    fn jobs_show_the_chain_a_batch_job_starts_after_even_before_it_has_a_group() {
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "prepare", "namespace": "ml",
                "creationTimestamp": "2026-11-26T10:00:00Z",
                "ownerReferences": [{"apiVersion": "batch.gangplank.dev/v1alpha1", "kind": "Job",
                    "name": "prepare", "uid": "u1", "controller": true}]},
            "spec": {"minMember": 1, "queue": "research"},
            "status": {"phase": "Running", "scheduled": 1}
        }))
        .unwrap();
        let job = |name: &str, after: serde_json::Value, status: serde_json::Value| -> BatchJob {
            serde_json::from_value(json!({
                "apiVersion": "batch.gangplank.dev/v1alpha1", "kind": "Job",
                "metadata": {"name": name, "namespace": "ml",
                    "creationTimestamp": "2026-11-26T10:00:00Z"},
                "spec": {"queue": "research", "dependsOn": after,
                    "tasks": [{"name": "worker", "replicas": 2, "template": {}}]},
                "status": status,
            }))
            .unwrap()
        };
        let jobs = [
            job(
                "prepare",
                json!(null),
                json!({"state": {"phase": "Running"}}),
            ),
            job(
                "train",
                json!({"name": ["prepare"]}),
                json!({"state": {"phase": "Pending", "reason": "WaitingForDependencies",
                    "message": "waiting for prepare (Running)"}}),
            ),
        ];
        let now: Timestamp = "2026-11-26T10:10:00Z".parse().unwrap();
        let views = with_jobs(vec![view(&group, now)], &jobs, now);
        assert_eq!(
            render(&views, false, true),
            "WORKLOAD     QUEUE     PHASE    PLACED  AGE  AFTER    WHY\n\
             Job/prepare  research  Running  1/1     10m\n\
             Job/train    research  Pending  0/2     10m  prepare  WaitingForDependencies: waiting for prepare (Running)\n"
        );
    }
}
