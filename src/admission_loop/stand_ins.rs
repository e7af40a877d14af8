//! Stand-in pods: the admission loop's writes for growth (`gangplank_core::model::growth`). After
//! each pass it deletes the stand-ins no gang asked for, records the growths that timed out
//! (with what the autoscaler last said about one of their stand-ins) in the ledger, and creates
//! the stand-ins a growing gang lacks, in Gangplank's own namespace. This module is their only
//! writer.
//!
//! A stand-in asks for what its member asks for (marker resources aside), copies the member's
//! node selector, affinity and tolerations so the autoscaler provisions the nodes the member
//! may run on, runs the pause image as the `restricted` Pod Security level asks, and carries `karpenter.sh/do-not-disrupt` (and the Cluster
//! Autoscaler's `safe-to-evict: false`) so the node made for it is not consolidated away
//! before the gang takes its place. Its name is fixed by its gang and index
//! (`stand_in_name`), so creating it twice fails with AlreadyExists and changes nothing.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, Event, Pod, PodSecurityContext, PodSpec, ResourceRequirements,
    SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use tokio::time::Instant;

use crate::api::labels;
use crate::cache::LedgerWriter;
use crate::metrics;
use gangplank_core::admit::plan::{Decision, GrowthAsk, PodRef};
use gangplank_core::model::growth::stand_in_name;
use gangplank_core::model::resources::human;
use gangplank_core::model::{GroupKey, GrowthFailed, Resources};

/// The pause image's user (`nobody`'s 65535), so a stand-in runs as non-root.
const PAUSE_USER: i64 = 65_535;

/// How long a stand-in just created (or refused) is not created again: while the cache catches
/// up, or before trying again.
const CREATED_KEPT: Duration = Duration::from_secs(10);

/// What stand-ins look like, from the flags.
#[derive(Debug, Clone)]
pub struct StandInTemplate {
    /// Gangplank's namespace.
    pub namespace: String,
    pub image: String,
    /// Empty: none.
    pub priority_class: String,
}

/// The stand-ins' writer.
pub struct StandIns {
    client: Client,
    settings: StandInTemplate,
    /// Stand-ins created recently, by name.
    created: HashMap<String, Instant>,
}

impl StandIns {
    pub fn new(client: Client, settings: StandInTemplate) -> StandIns {
        StandIns {
            client,
            settings,
            created: HashMap::new(),
        }
    }

    /// Deletes the unwanted stand-ins and records the timed-out growths of `decision`: before
    /// the pass's releases, so that the room of a gang's stand-ins frees as its members arrive.
    pub async fn clear(&mut self, decision: &Decision, ledger: &LedgerWriter) {
        for group in &decision.growth_timed_out {
            let message = self.autoscaler_said(group).await;
            tracing::warn!(group = %group, message = message.as_deref().unwrap_or(""), "growth given up: stand-ins unplaced after the timeout");
            ::metrics::counter!(metrics::GROWTH_TIMEOUTS_TOTAL).increment(1);
            ledger.growth_failed(
                group,
                GrowthFailed {
                    at: crate::clock::unix_now(),
                    message,
                },
            );
        }
        for pod in &decision.unwanted_stand_ins {
            self.created.remove(&pod.name);
            if let Err(e) = self.delete(pod).await {
                tracing::warn!(pod = %pod.name, error = %e, "stand-in not deleted");
            }
        }
    }

    /// Creates the stand-ins the growing gangs of `decision` lack, and records in the ledger
    /// which gangs grow (and why a stand-in was refused, if one was).
    pub async fn ask(&mut self, decision: &Decision, ledger: &LedgerWriter) {
        ledger.growth_asked(&decision.grow, crate::clock::unix_now());
        let now = Instant::now();
        self.created
            .retain(|_, at| now.duration_since(*at) < CREATED_KEPT);
        ::metrics::gauge!(metrics::GROWTH_GANGS).set(decision.grow.len() as f64);
        for ask in &decision.grow {
            let due: Vec<usize> = ask
                .missing
                .iter()
                .copied()
                .filter(|&n| !self.created.contains_key(&stand_in_name(&ask.group, n)))
                .collect();
            if due.is_empty() {
                continue;
            }
            let member = match self.member(&ask.model).await {
                Ok(Some(member)) => member,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(group = %ask.group, error = %e, "stand-ins not made: the member to copy could not be read");
                    continue;
                }
            };
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.settings.namespace);
            for n in due {
                let pod = stand_in(&self.settings, ask, n, &member);
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(_) => {
                        ::metrics::counter!(metrics::GROWTH_STAND_INS_CREATED_TOTAL).increment(1);
                        tracing::info!(group = %ask.group, stand_in = %stand_in_name(&ask.group, n), "stand-in made");
                    }
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(e) => {
                        // Kept like a stand-in made: tried again after CREATED_KEPT, not on
                        // every pass.
                        tracing::warn!(group = %ask.group, error = %e, "stand-in not made");
                        ledger.stand_in_refused(&ask.group, refusal(&e));
                    }
                }
                self.created.insert(stand_in_name(&ask.group, n), now);
            }
        }
    }

    /// The gated member whose constraints the stand-ins copy, if it still exists (a list by
    /// name: Gangplank may list pods, not get them).
    async fn member(&self, model: &PodRef) -> Result<Option<Pod>, kube::Error> {
        let by_name = ListParams::default().fields(&format!("metadata.name={}", model.name));
        let list = Api::<Pod>::namespaced(self.client.clone(), &model.namespace)
            .list(&by_name)
            .await?;
        Ok(list
            .items
            .into_iter()
            .find(|p| p.metadata.uid.as_deref() == Some(&model.uid)))
    }

    async fn delete(&self, pod: &PodRef) -> Result<(), kube::Error> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(pod.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match Api::<Pod>::namespaced(self.client.clone(), &pod.namespace)
            .delete(&pod.name, &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The latest `FailedScheduling` message about a stand-in of `group`: the autoscaler's if
    /// it said anything (Karpenter's "all available instance types exceed limits ..."), else
    /// the scheduler's.
    async fn autoscaler_said(&self, group: &GroupKey) -> Option<String> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let prefix = stand_in_name(group, 0);
        let prefix = prefix.trim_end_matches('0');
        let list = events
            .list(&ListParams::default().fields("reason=FailedScheduling"))
            .await
            .map_err(|e| tracing::warn!(error = %e, "events of stand-ins not read"))
            .ok()?;
        let mut about: Vec<&Event> = list
            .items
            .iter()
            .filter(|e| {
                e.involved_object
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .collect();
        about.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
        let from_scheduler = |e: &&Event| {
            e.reporting_component.as_deref() == Some("default-scheduler")
                || e.source.as_ref().and_then(|s| s.component.as_deref())
                    == Some("default-scheduler")
        };
        let names_limits = |e: &&&Event| e.message.as_deref().is_some_and(|m| m.contains("limit"));
        // The autoscaler's messages change as it goes (Karpenter says its NodePool's limits are
        // reached, then, once at them, that no instance type fits): one naming limits names
        // the cause.
        about
            .iter()
            .rev()
            .find(|e| !from_scheduler(e) && names_limits(e))
            .or_else(|| about.iter().rev().find(|e| !from_scheduler(e)))
            .or_else(|| about.last())
            .and_then(|e| e.message.clone())
    }
}

/// What the API server said refusing a stand-in, for the gang's wait.
fn refusal(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// The `n`th stand-in of `ask`, copying `member`'s scheduling constraints.
fn stand_in(settings: &StandInTemplate, ask: &GrowthAsk, n: usize, member: &Pod) -> Pod {
    let spec = member.spec.clone().unwrap_or_default();
    let requests = quantities(&ask.members[n]);
    // Extended resources must be limited to what is requested.
    let limits: BTreeMap<String, Quantity> = requests
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage"))
        .map(|(name, q)| (name.clone(), q.clone()))
        .collect();
    Pod {
        metadata: ObjectMeta {
            name: Some(stand_in_name(&ask.group, n)),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([(
                labels::STAND_IN_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            annotations: Some(BTreeMap::from([
                (
                    labels::STAND_IN_FOR_ANNOTATION.to_owned(),
                    format!("{}/{}", ask.group.namespace, ask.group.name),
                ),
                ("karpenter.sh/do-not-disrupt".to_owned(), "true".to_owned()),
                (
                    "cluster-autoscaler.kubernetes.io/safe-to-evict".to_owned(),
                    "false".to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            // What the namespace's `restricted` Pod Security level asks (the chart labels it so).
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(PAUSE_USER),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    localhost_profile: None,
                }),
                ..PodSecurityContext::default()
            }),
            containers: vec![Container {
                name: "stand-in".to_owned(),
                image: Some(settings.image.clone()),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".to_owned()]),
                        add: None,
                    }),
                    read_only_root_filesystem: Some(true),
                    ..SecurityContext::default()
                }),
                resources: Some(ResourceRequirements {
                    requests: Some(requests),
                    limits: (!limits.is_empty()).then_some(limits),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            node_selector: spec.node_selector,
            affinity: spec.affinity,
            tolerations: spec.tolerations,
            priority_class_name: (!settings.priority_class.is_empty())
                .then(|| settings.priority_class.clone()),
            termination_grace_period_seconds: Some(0),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// `requests` as a pod's resource list: Gangplank's markers and the `pods` count left out.
fn quantities(requests: &Resources) -> BTreeMap<String, Quantity> {
    requests
        .ids()
        .filter(|(id, amount)| !id.is_marker() && id.name() != "pods" && *amount > 0)
        .map(|(id, amount)| (id.name().to_owned(), Quantity(human(id.name(), amount))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(members: Vec<Resources>) -> GrowthAsk {
        GrowthAsk {
            group: GroupKey::new("team-a", "train"),
            queue: "a".into(),
            model: PodRef {
                namespace: "team-a".into(),
                name: "train-0".into(),
                uid: "u".into(),
                gates: vec![labels::ADMISSION_GATE.into()],
                node_selector: None,
                annotated: false,
            },
            missing: (0..members.len()).collect(),
            members,
        }
    }

    #[test]
    fn a_stand_in_asks_what_its_member_asks_without_markers_and_copies_where_it_may_run() {
        let member: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "train-0", "namespace": "team-a"},
            "spec": {
                "containers": [{"name": "c", "image": "trainer"}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "gpu-8x"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "schedulingGates": [{"name": labels::ADMISSION_GATE}],
                "priorityClassName": "high",
            },
        }))
        .unwrap();
        let requests = Resources::from([
            ("cpu", 8_500),
            ("memory", 16 << 30),
            ("nvidia.com/gpu", 8),
            ("pods", 1),
            (labels::MANAGED_RESOURCE, 1),
        ]);
        let settings = StandInTemplate {
            namespace: "gangplank-system".into(),
            image: "pause".into(),
            priority_class: "gangplank-stand-in".into(),
        };
        let pod = stand_in(&settings, &ask(vec![requests]), 0, &member);
        let json = serde_json::to_value(&pod).unwrap();
        assert_eq!(json["metadata"]["namespace"], "gangplank-system");
        assert_eq!(
            json["metadata"]["annotations"][labels::STAND_IN_FOR_ANNOTATION],
            "team-a/train"
        );
        assert_eq!(json["metadata"]["labels"][labels::STAND_IN_LABEL], "true");
        assert_eq!(
            json["spec"]["containers"][0]["resources"],
            serde_json::json!({
                "requests": {"cpu": "8500m", "memory": "16Gi", "nvidia.com/gpu": "8"},
                "limits": {"nvidia.com/gpu": "8"},
            })
        );
        assert_eq!(
            json["spec"]["nodeSelector"],
            serde_json::json!({"node.kubernetes.io/instance-type": "gpu-8x"})
        );
        assert_eq!(json["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");
        assert_eq!(json["spec"]["priorityClassName"], "gangplank-stand-in");
        assert!(
            json["spec"].get("schedulingGates").is_none(),
            "a stand-in is never gated: {json}"
        );
        assert_eq!(json["spec"]["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            json["spec"]["containers"][0]["securityContext"]["capabilities"]["drop"][0],
            "ALL"
        );
    }
}
