//! `gangplank why`: the story of one workload, the first command a user runs when a job waits.
//! For a pod, a PodGroup or a Job (whose group is named after it): the group's phase and
//! conditions (the admission reason with its numbers), the Events about the group, the Job and
//! each member (Gangplank's waits, reservations and evictions, the scheduler's and the
//! kubelet's), and each member's `PodScheduled` condition, the scheduler's last word on it.

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;

use super::groups::{GroupRow, view};
use super::render::{age, table};
use super::{WhyArgs, client, print, repeat};
use crate::api::{PodGroup, labels};

/// What `why` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Story {
    pub namespace: String,
    /// The group the target belongs to, if any.
    pub group_name: Option<String>,
    /// Its PodGroup, when it exists.
    pub group: Option<GroupRow>,
    pub conditions: Vec<ConditionView>,
    pub members: Vec<MemberView>,
    /// Oldest first.
    pub events: Vec<EventView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConditionView {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberView {
    pub name: String,
    pub phase: String,
    pub node: Option<String>,
    /// Scheduling gates left on it (Gangplank's while admission holds it back).
    pub gates: Vec<String>,
    /// The scheduler's `PodScheduled` condition when it is not True: `Reason: message`.
    pub scheduler_says: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub age_seconds: i64,
    /// `Kind/name` of the object the Event is about.
    pub object: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// The target as `(kind, name)`: `pod`, `podgroup` or `job`.
pub fn target(text: &str) -> anyhow::Result<(&'static str, &str)> {
    let (kind, name) = text.split_once('/').unwrap_or(("pod", text));
    let kind = match kind.to_ascii_lowercase().as_str() {
        "pod" | "pods" | "po" => "pod",
        "podgroup" | "podgroups" | "pg" | "group" => "podgroup",
        "job" | "jobs" => "job",
        other => anyhow::bail!(
            "cannot explain a {other:?}: name a pod (pod/NAME or NAME), a PodGroup (podgroup/NAME) or a Job (job/NAME)"
        ),
    };
    anyhow::ensure!(!name.is_empty(), "name the {kind} to explain");
    Ok((kind, name))
}

fn member(pod: &Pod) -> MemberView {
    let status = pod.status.as_ref();
    let scheduled = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status != "True");
    MemberView {
        name: pod.metadata.name.clone().unwrap_or_default(),
        phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        gates: pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .into_iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
        scheduler_says: scheduled.map(|c| {
            format!(
                "{}: {}",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            )
        }),
    }
}

/// The story of `group_name` in `namespace` from what was read: its PodGroup, its pods, and
/// the namespace's Events, of which those about the group, its pods and `also` (a Job) count.
pub fn story(
    namespace: &str,
    group_name: Option<&str>,
    group: Option<&PodGroup>,
    pods: &[Pod],
    events: &[Event],
    also: Option<(&str, &str)>,
    now: Timestamp,
) -> Story {
    let members: Vec<MemberView> = pods.iter().map(member).collect();
    let about = |e: &Event| {
        let o = &e.involved_object;
        let (kind, name) = (
            o.kind.as_deref().unwrap_or(""),
            o.name.as_deref().unwrap_or(""),
        );
        (kind == "PodGroup" && Some(name) == group_name)
            || (kind == "Pod" && members.iter().any(|m| m.name == name))
            || also == Some((kind, name))
    };
    let mut events: Vec<(Timestamp, EventView)> = events
        .iter()
        .filter(|e| about(e))
        .map(|e| {
            let at = e
                .last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or(e.event_time.as_ref().map(|t| t.0))
                .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .unwrap_or(now);
            let o = &e.involved_object;
            let view = EventView {
                age_seconds: now.as_second() - at.as_second(),
                object: format!(
                    "{}/{}",
                    o.kind.as_deref().unwrap_or(""),
                    o.name.as_deref().unwrap_or("")
                ),
                type_: e.type_.clone().unwrap_or_default(),
                reason: e.reason.clone().unwrap_or_default(),
                message: e.message.clone().unwrap_or_default(),
                count: e.count.unwrap_or(1),
            };
            (at, view)
        })
        .collect();
    events.sort_by_key(|(at, _)| *at);
    Story {
        namespace: namespace.to_owned(),
        group_name: group_name.map(str::to_owned),
        group: group.map(|g| view(g, now)),
        conditions: group
            .and_then(|g| g.status.as_ref())
            .map(|s| {
                s.conditions
                    .iter()
                    .map(|c| ConditionView {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        members,
        events: events.into_iter().map(|(_, v)| v).collect(),
    }
}

pub fn render(story: &Story) -> String {
    let mut out = String::new();
    match (&story.group_name, &story.group) {
        (Some(name), Some(g)) => out.push_str(&format!(
            "PodGroup {}/{name}: {}, {}/{} members placed, queue {}\n",
            story.namespace, g.phase, g.placed, g.min_member, g.queue
        )),
        (Some(name), None) => out.push_str(&format!(
            "PodGroup {}/{name} does not exist: its pods wait for it (see the Events below)\n",
            story.namespace
        )),
        (None, _) => out.push_str("Not in a gang: Gangplank admits this pod on its own\n"),
    }
    for c in &story.conditions {
        out.push_str(&format!(
            "  {}={} {}: {}\n",
            c.type_, c.status, c.reason, c.message
        ));
    }
    if !story.members.is_empty() {
        out.push_str("\nPods:\n");
        let rows: Vec<Vec<String>> = story
            .members
            .iter()
            .map(|m| {
                vec![
                    m.name.clone(),
                    m.phase.clone(),
                    m.node.clone().unwrap_or_else(|| "-".to_owned()),
                    if m.gates.is_empty() {
                        "-".to_owned()
                    } else {
                        m.gates.join(",")
                    },
                    m.scheduler_says.clone().unwrap_or_default(),
                ]
            })
            .collect();
        out.push_str(&table(
            &["POD", "PHASE", "NODE", "GATES", "SCHEDULER SAYS"],
            &rows,
        ));
    }
    if !story.events.is_empty() {
        out.push_str("\nEvents (oldest first):\n");
        let rows: Vec<Vec<String>> = story
            .events
            .iter()
            .map(|e| {
                let count = if e.count > 1 {
                    format!(" (x{})", e.count)
                } else {
                    String::new()
                };
                vec![
                    age(e.age_seconds),
                    e.object.clone(),
                    e.type_.clone(),
                    e.reason.clone(),
                    format!("{}{count}", e.message),
                ]
            })
            .collect();
        out.push_str(&table(
            &["AGE", "OBJECT", "TYPE", "REASON", "MESSAGE"],
            &rows,
        ));
    }
    out
}

pub async fn run(args: WhyArgs) -> anyhow::Result<()> {
    let (client, default_namespace) = client(args.common.context.as_deref()).await?;
    let namespace = args.namespace.unwrap_or(default_namespace);
    let (kind, name) = target(&args.target)?;
    repeat(args.watch, || async {
        let story = fetch(&client, &namespace, kind, name).await?;
        print(args.common.output, &story, || render(&story));
        Ok(())
    })
    .await
}

/// Reads what the story of `kind`/`name` needs and tells it.
async fn fetch(client: &Client, namespace: &str, kind: &str, name: &str) -> anyhow::Result<Story> {
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let groups: Api<PodGroup> = Api::namespaced(client.clone(), namespace);
    let (group_name, lone) = match kind {
        "pod" => {
            let pod = pods_api.get(name).await?;
            let meta = &pod.metadata;
            let group = labels::pod_group_of(meta.labels.as_ref(), meta.annotations.as_ref())
                .map(str::to_owned);
            (group, Some(pod))
        }
        _ => (Some(name.to_owned()), None),
    };
    let group = match &group_name {
        Some(g) => groups.get_opt(g).await?,
        None => None,
    };
    let pods = match (&group_name, lone) {
        (Some(g), _) => {
            let selector = format!("{}={g}", labels::POD_GROUP_LABEL);
            let mut pods = pods_api
                .list(&ListParams::default().labels(&selector))
                .await?
                .items;
            pods.sort_by_key(|p| p.metadata.name.clone());
            pods
        }
        (None, Some(pod)) => vec![pod],
        (None, None) => Vec::new(),
    };
    let events = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items;
    let also = (kind == "job").then_some(("Job", name));
    Ok(story(
        namespace,
        group_name.as_deref(),
        group.as_ref(),
        &pods,
        &events,
        also,
        Timestamp::now(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn targets_are_named_like_kubectl_names_them() {
        assert_eq!(target("train-0").unwrap(), ("pod", "train-0"));
        assert_eq!(target("pg/train").unwrap(), ("podgroup", "train"));
        assert_eq!(target("job/train").unwrap(), ("job", "train"));
        let error = target("deployment/web").unwrap_err().to_string();
        assert!(error.contains("name a pod"), "{error}");
    }

    #[test]
    fn the_story_puts_the_group_s_reason_its_pods_and_their_events_together() {
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml",
                "creationTimestamp": "2026-11-26T10:00:00Z"},
            "spec": {"minMember": 2, "queue": "research"},
            "status": {"phase": "Pending", "conditions": [
                {"type": "Admitted", "status": "False", "reason": "WaitingForAdmission",
                 "message": "does not fit now", "lastTransitionTime": "2026-11-26T10:00:01Z"}]}
        }))
        .unwrap();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "train-0", "namespace": "ml"},
            "spec": {"containers": [], "schedulingGates": [
                {"name": "scheduling.gangplank.dev/admission"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let event = |kind: &str, name: &str, reason: &str, at: &str| -> Event {
            serde_json::from_value(json!({
                "metadata": {"name": format!("{name}.{reason}"), "namespace": "ml"},
                "involvedObject": {"kind": kind, "name": name},
                "type": "Normal", "reason": reason, "message": format!("{reason} happened"),
                "lastTimestamp": at, "count": 1
            }))
            .unwrap()
        };
        let events = [
            event(
                "Pod",
                "train-0",
                "WaitingForAdmission",
                "2026-11-26T10:04:00Z",
            ),
            event("PodGroup", "train", "Created", "2026-11-26T10:00:00Z"),
            event("Pod", "someone-else", "Scheduled", "2026-11-26T10:01:00Z"),
        ];
        let now: Timestamp = "2026-11-26T10:05:00Z".parse().unwrap();
        let story = story(
            "ml",
            Some("train"),
            Some(&group),
            &[pod],
            &events,
            None,
            now,
        );
        assert_eq!(
            render(&story),
            "PodGroup ml/train: Pending, 0/2 members placed, queue research\n  \
             Admitted=False WaitingForAdmission: does not fit now\n\
             \n\
             Pods:\n\
             POD      PHASE    NODE  GATES                               SCHEDULER SAYS\n\
             train-0  Pending  -     scheduling.gangplank.dev/admission\n\
             \n\
             Events (oldest first):\n\
             AGE  OBJECT          TYPE    REASON               MESSAGE\n\
             5m   PodGroup/train  Normal  Created              Created happened\n\
             60s  Pod/train-0     Normal  WaitingForAdmission  WaitingForAdmission happened\n"
        );
    }
}
