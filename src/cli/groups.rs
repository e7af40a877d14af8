//! `gangplank groups`: PodGroups with their phase, members placed of `minMember`, queue, age
//! and, when they wait or failed, the condition that says why.

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;

use super::render::{age, table};
use super::{GroupsArgs, client, print, repeat};
use crate::api::PodGroup;
use crate::controller::status::{ADMITTED, FAILED, SCHEDULED};

/// One group as the command shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
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

pub fn view(group: &PodGroup, now: Timestamp) -> GroupView {
    let status = group.status.clone().unwrap_or_default();
    let created = group
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    GroupView {
        namespace: group.metadata.namespace.clone().unwrap_or_default(),
        name: group.metadata.name.clone().unwrap_or_default(),
        queue: group.spec.queue_name().to_owned(),
        phase: format!("{:?}", status.phase),
        placed: status.scheduled,
        min_member: group.spec.min_member,
        age_seconds: now.as_second() - created.as_second(),
        why: why(group),
    }
}

pub fn render(views: &[GroupView], all_namespaces: bool) -> String {
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            let mut row = vec![
                v.name.clone(),
                v.queue.clone(),
                v.phase.clone(),
                format!("{}/{}", v.placed, v.min_member),
                age(v.age_seconds),
                v.why.clone().unwrap_or_default(),
            ];
            if all_namespaces {
                row.insert(0, v.namespace.clone());
            }
            row
        })
        .collect();
    let mut headers = vec!["NAME", "QUEUE", "PHASE", "PLACED", "AGE", "WHY"];
    if all_namespaces {
        headers.insert(0, "NAMESPACE");
    }
    table(&headers, &rows)
}

pub async fn run(args: GroupsArgs) -> anyhow::Result<()> {
    let (client, default_namespace) = client(args.common.context.as_deref()).await?;
    let api: Api<PodGroup> = if args.all_namespaces {
        Api::all(client)
    } else {
        let namespace = args.namespace.unwrap_or(default_namespace);
        Api::namespaced(client, &namespace)
    };
    repeat(args.common.watch, || async {
        let mut groups = api.list(&ListParams::default()).await?.items;
        groups.sort_by_key(|g| (g.metadata.namespace.clone(), g.metadata.name.clone()));
        let now = Timestamp::now();
        let views: Vec<GroupView> = groups.iter().map(|g| view(g, now)).collect();
        print(args.common.output, &views, || {
            render(&views, args.all_namespaces)
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
            render(&views, true),
            "NAMESPACE  NAME   QUEUE     PHASE    PLACED  AGE  WHY\n\
             ml         train  research  Pending  0/4     5m   WaitingForAdmission: does not fit now: 4 pods of {cpu: 32}; only 3 fit\n"
        );
    }
}
