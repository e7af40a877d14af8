//! `gangplank top`: a live view, shown again every 2 seconds until interrupted: the queues
//! (`gangplank queues`), then every group waiting for admission in any namespace, by queue, the
//! head of the line (the group holding a reservation) first, then oldest first, with why it
//! waits.

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;

use super::groups::{GroupRow, view};
use super::queues::{QueueView, views};
use super::render::{age, table};
use super::{Common, client, print, queues, repeat};
use crate::api::{PodGroup, Queue};

/// The reason of the group at the head of the line: admitted next, it holds a reservation
/// that the groups behind it may not take (`gangplank_core::admit::plan`).
const HEAD: &str = "Reserved:";

/// What one refresh shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Top {
    pub queues: Vec<QueueView>,
    /// Groups in phase Pending, by queue, the head of the line first, then oldest first.
    pub waiting: Vec<GroupRow>,
}

pub fn top(queue_list: &[Queue], groups: &[PodGroup], now: Timestamp) -> Top {
    let mut waiting: Vec<GroupRow> = groups
        .iter()
        .map(|g| view(g, now))
        .filter(|v| v.phase == "Pending")
        .collect();
    let head = |v: &GroupRow| !v.why.as_deref().is_some_and(|w| w.starts_with(HEAD));
    waiting.sort_by(|a, b| {
        (
            a.queue.as_str(),
            head(a),
            -a.age_seconds,
            &a.namespace,
            &a.name,
        )
            .cmp(&(
                b.queue.as_str(),
                head(b),
                -b.age_seconds,
                &b.namespace,
                &b.name,
            ))
    });
    Top {
        queues: views(queue_list),
        waiting,
    }
}

pub fn render(top: &Top) -> String {
    let mut out = queues::render(&top.queues);
    out.push_str("\nWAITING (by queue; the head of the line, which holds a reservation, first; then oldest first)\n");
    let rows: Vec<Vec<String>> = top
        .waiting
        .iter()
        .map(|v| {
            vec![
                v.queue.clone(),
                format!("{}/{}", v.namespace, v.name),
                format!("{}/{}", v.placed, v.min_member),
                age(v.age_seconds),
                v.why.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(&["QUEUE", "GROUP", "PLACED", "AGE", "WHY"], &rows));
    out
}

pub async fn run(args: Common) -> anyhow::Result<()> {
    let (client, _) = client(args.context.as_deref()).await?;
    let queue_api = Api::<Queue>::all(client.clone());
    let group_api = Api::<PodGroup>::all(client);
    repeat(true, || async {
        let queue_list = queue_api.list(&ListParams::default()).await?.items;
        let groups = group_api.list(&ListParams::default()).await?.items;
        let top = top(&queue_list, &groups, Timestamp::now());
        print(args.output, &top, || render(&top));
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn waiting_groups_are_listed_by_queue_the_head_of_the_line_first_then_oldest_first() {
        let group = |ns: &str, name: &str, queue: &str, created: &str, phase: &str| -> PodGroup {
            serde_json::from_value(json!({
                "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
                "spec": {"minMember": 2, "queue": queue},
                "status": {"phase": phase}
            }))
            .unwrap()
        };
        let queue: Queue = serde_json::from_value(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
            "metadata": {"name": "research"}, "spec": {"weight": 1}
        }))
        .unwrap();
        let mut head = group("ml", "head", "research", "2026-11-26T10:04:30Z", "Pending");
        head.status.as_mut().unwrap().conditions = vec![
            serde_json::from_value(json!({
                "type": "Admitted", "status": "False", "reason": "Reserved",
                "message": "first in line", "lastTransitionTime": "2026-11-26T10:04:30Z"
            }))
            .unwrap(),
        ];
        let groups = [
            head,
            group("ml", "young", "research", "2026-11-26T10:04:00Z", "Pending"),
            group("ml", "old", "research", "2026-11-26T10:00:00Z", "Pending"),
            group("web", "first", "batch", "2026-11-26T10:03:00Z", "Pending"),
            group(
                "ml",
                "running",
                "research",
                "2026-11-26T09:00:00Z",
                "Running",
            ),
        ];
        let now: Timestamp = "2026-11-26T10:05:00Z".parse().unwrap();
        let text = render(&top(&[queue], &groups, now));
        let waiting = text.split("then oldest first)\n").nth(1).unwrap();
        assert_eq!(
            waiting,
            "QUEUE     GROUP      PLACED  AGE  WHY\n\
             batch     web/first  0/2     2m\n\
             research  ml/head    0/2     30s  Reserved: first in line\n\
             research  ml/old     0/2     5m\n\
             research  ml/young   0/2     60s\n"
        );
        assert!(text.starts_with("QUEUE "), "{text}");
    }
}
