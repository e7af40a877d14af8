//! `gangplank queues`: every Queue with its weight, deserved share, what its admitted groups
//! hold, what it borrows (holds above its share), guarantee, capability, groups by phase and
//! which namespaces may submit to it, children under their parent.

use std::collections::BTreeMap;

use kube::Api;
use kube::api::ListParams;
use serde::Serialize;

use super::render::{above, resources, table, written};
use super::{QueuesArgs, client, print, repeat};
use crate::api::{Queue, QueueState};

/// One queue as the command shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueView {
    pub name: String,
    pub parent: Option<String>,
    /// How many ancestors it has (0 for a root), for the tree.
    #[serde(skip)]
    pub depth: usize,
    pub state: String,
    pub weight: i32,
    pub deserved: BTreeMap<String, String>,
    pub allocated: BTreeMap<String, String>,
    /// `allocated` above `deserved`, per resource where it is above.
    pub borrowed: BTreeMap<String, String>,
    pub guarantee: BTreeMap<String, String>,
    pub capability: BTreeMap<String, String>,
    /// PodGroups waiting for admission, admitted and not running yet, and running.
    pub waiting: i32,
    pub admitted: i32,
    pub running: i32,
    /// Which namespaces may submit to it (`spec.namespaceSelector`), or `all`.
    pub namespaces: String,
}

/// The queues depth first, each parent before its children, siblings by name; a queue whose
/// parent does not exist is shown as a root.
pub fn views(queues: &[Queue]) -> Vec<QueueView> {
    let names: Vec<&str> = queues
        .iter()
        .filter_map(|q| q.metadata.name.as_deref())
        .collect();
    let parent_of = |q: &Queue| {
        q.spec
            .parent
            .clone()
            .filter(|p| names.contains(&p.as_str()))
    };
    let mut children: BTreeMap<Option<String>, Vec<&Queue>> = BTreeMap::new();
    for q in queues {
        children.entry(parent_of(q)).or_default().push(q);
    }
    for list in children.values_mut() {
        list.sort_by_key(|q| q.metadata.name.clone());
    }
    let mut out = Vec::new();
    let mut stack: Vec<(&Queue, usize)> = children
        .get(&None)
        .into_iter()
        .flatten()
        .rev()
        .map(|q| (*q, 0))
        .collect();
    while let Some((q, depth)) = stack.pop() {
        let name = q.metadata.name.clone().unwrap_or_default();
        let status = q.status.clone().unwrap_or_default();
        out.push(QueueView {
            parent: parent_of(q),
            depth,
            state: match q.spec.state {
                QueueState::Open => "Open",
                QueueState::Closed => "Closed",
            }
            .to_owned(),
            weight: q.spec.weight,
            deserved: written(&status.deserved),
            allocated: written(&status.allocated),
            borrowed: above(&status.allocated, &status.deserved),
            guarantee: written(&q.spec.guarantee),
            capability: written(&q.spec.capability),
            waiting: status.pending,
            admitted: status.admitted,
            running: status.running,
            namespaces: crate::api::queue::namespaces_rule(q.spec.namespace_selector.as_ref()),
            name: name.clone(),
        });
        for child in children.get(&Some(name)).into_iter().flatten().rev() {
            stack.push((child, depth + 1));
        }
    }
    out
}

/// The table of `views`: children indented under their parent.
pub fn render(views: &[QueueView]) -> String {
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            let name = match v.depth {
                0 => v.name.clone(),
                d => format!("{}└─ {}", "   ".repeat(d - 1), v.name),
            };
            vec![
                name,
                v.state.clone(),
                v.weight.to_string(),
                resources(&v.deserved),
                resources(&v.allocated),
                resources(&v.borrowed),
                resources(&v.guarantee),
                resources(&v.capability),
                v.waiting.to_string(),
                v.admitted.to_string(),
                v.running.to_string(),
                v.namespaces.clone(),
            ]
        })
        .collect();
    table(
        &[
            "QUEUE",
            "STATE",
            "WEIGHT",
            "DESERVED",
            "ALLOCATED",
            "BORROWED",
            "GUARANTEE",
            "CAPABILITY",
            "WAITING",
            "ADMITTED",
            "RUNNING",
            "NAMESPACES",
        ],
        &rows,
    )
}

pub async fn run(args: QueuesArgs) -> anyhow::Result<()> {
    let (client, _) = client(args.common.context.as_deref()).await?;
    let api = Api::<Queue>::all(client);
    repeat(args.watch, || async {
        let queues = api.list(&ListParams::default()).await?.items;
        let views = views(&queues);
        print(args.common.output, &views, || render(&views));
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn queue(value: serde_json::Value) -> Queue {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn queues_show_as_a_tree_with_what_each_borrows() {
        let queues = [
            queue(
                json!({"apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
                "metadata": {"name": "vision"}, "spec": {"weight": 1, "parent": "research"},
                "status": {"deserved": {"cpu": "8"}, "allocated": {"cpu": "12"},
                    "pending": 2, "admitted": 0, "running": 3}}),
            ),
            queue(
                json!({"apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
                "metadata": {"name": "research"}, "spec": {"weight": 2,
                    "guarantee": {"cpu": "4"}}}),
            ),
            queue(
                json!({"apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
                "metadata": {"name": "batch"}, "spec": {"weight": 1, "state": "Closed",
                    "namespaceSelector": {"matchLabels": {"team": "batch"}}}}),
            ),
        ];
        let views = views(&queues);
        let names: Vec<&str> = views.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["batch", "research", "vision"]);
        assert_eq!(
            views[2].borrowed,
            BTreeMap::from([("cpu".into(), "4".into())])
        );
        assert_eq!(
            render(&views),
            "QUEUE      STATE   WEIGHT  DESERVED  ALLOCATED  BORROWED  GUARANTEE  CAPABILITY  WAITING  ADMITTED  RUNNING  NAMESPACES\n\
             batch      Closed  1       -         -          -         -          -           0        0         0        team=batch\n\
             research   Open    2       -         -          -         cpu:4      -           0        0         0        all\n\
             └─ vision  Open    1       cpu:8     cpu:12     cpu:4     -          -           2        0         3        all\n"
        );
    }
}
