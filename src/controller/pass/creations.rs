//! The pass's first phase: the PodGroups to create or resize, for batch/v1 Jobs, for other
//! schedulers' PodGroups, for workloads of known kinds (whose objects it reads first) and for
//! pods that ask for one, with the Events they want.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use super::super::api_writes::api_message_of;
use super::super::foreign_groups::Foreign;
use super::super::observe::{Asked, Observation};
use super::super::{CREATE_RETRY_AFTER, Controller, Creation, Relabel, Resize, WRITE_CONCURRENCY};
use super::super::{batch_v1_jobs, composite_trees, foreign_groups, orphans, workloads};
use crate::api::composite_pod_group::Shape;
use crate::api::{self, labels};
use crate::cache::lookup::{NamespaceLookup, PodGroupLookup, TopologyLookup};
use crate::events::{self, Event};
use gangplank_core::model::{self, GroupKey};

impl Controller {
    /// PodGroups to create for Jobs, Conflict events, and the groups that Jobs account for.
    pub(super) fn job_pod_groups(
        &self,
        resizes: &mut Vec<Resize>,
        wanted: &mut Vec<Event>,
    ) -> (Vec<Creation>, HashSet<GroupKey>) {
        let mut creations = Vec::new();
        let mut groups = HashSet::new();
        for job in self.stores.jobs.state() {
            let (Some(name), Some(namespace)) = (batch_v1_jobs::gang_name(&job), job.namespace())
            else {
                continue;
            };
            groups.insert(GroupKey::new(namespace.clone(), name));
            let existing = self
                .stores
                .pod_groups
                .get(&ObjectRef::new(name).within(&namespace));
            let plan = batch_v1_jobs::plan(&job, existing.as_deref());
            carry_out(
                plan,
                "job",
                events::reference(job.as_ref()),
                (&mut creations, resizes),
                wanted,
            );
        }
        (creations, groups)
    }

    /// PodGroups to create or resize for the other schedulers' PodGroups and the roots of trees
    /// of Kubernetes' CompositePodGroups (whose PodGroups get none), and Conflict events; adds
    /// the groups they account for to `sourced`.
    pub(super) fn foreign_pod_groups(
        &self,
        sourced: &mut HashSet<GroupKey>,
        resizes: &mut Vec<Resize>,
        wanted: &mut Vec<Event>,
    ) -> Vec<Creation> {
        let mut creations = Vec::new();
        let scheduler_plugins = self.stores.scheduler_plugins_pod_groups.state();
        let volcano = self.stores.volcano_pod_groups.state();
        let upstream = self.stores.upstream_pod_groups.state();
        let upstream_v1alpha2 = self.stores.upstream_v1alpha2_pod_groups.state();
        let composites = self.stores.composite_pod_groups.state();
        let trees = composite_trees::roots(&composites, &upstream);
        for (root, shape) in &trees {
            let (Some(namespace), Some(name), Shape::Incomplete(why)) =
                (root.namespace(), &root.metadata.name, shape)
            else {
                continue;
            };
            sourced.insert(GroupKey::new(namespace, name.as_str()));
            wanted.push(Event {
                regarding: events::reference(root.as_ref()),
                warning: false,
                reason: "TreeIncomplete".to_owned(),
                action: "CreatePodGroup",
                note: format!("the tree's gang waits for its children: {why}"),
            });
        }
        let roots = trees.iter().filter_map(|(root, shape)| {
            let source = Foreign::root(root, shape)?;
            Some((source, events::reference(root.as_ref()), "workload-api"))
        });
        let leaves_alone: Vec<_> = upstream
            .iter()
            .filter(|g| !composite_trees::in_a_tree(g))
            .cloned()
            .collect();
        let workloads = self.stores.kueue_workloads.state();
        let ours = self.stores.kueue_checks_of_ours();
        let kueue_jobs = foreign_groups::kueue_jobs(&workloads, &|name| ours.contains(name));
        let kueue: Vec<_> = workloads
            .iter()
            .filter(|w| foreign_groups::kueue_wants_a_gang(w, &|name| ours.contains(name)))
            .map(|w| (w, foreign_groups::kueue_min_resources(w)))
            .collect();
        let kueue_sources = kueue.iter().map(|(w, min_resources)| {
            let source = Foreign::kueue(w, min_resources);
            (source, events::reference(w.as_ref()), "kueue")
        });
        let sources = dialect_sources(&scheduler_plugins, "scheduler-plugins")
            .chain(dialect_sources(&volcano, "volcano"))
            .chain(dialect_sources(&leaves_alone, "workload-api"))
            .chain(dialect_sources(&upstream_v1alpha2, "workload-api"))
            .chain(roots)
            .chain(kueue_sources);
        let topologies = self.stores.topologies().unwrap_or_default();
        for (source, regarding, dialect) in sources {
            let (Some(namespace), Some(name)) = (&source.meta.namespace, &source.meta.name) else {
                continue;
            };
            let job = |namespace: &str, name: &str| {
                self.stores
                    .jobs
                    .get(&ObjectRef::<Job>::new(name).within(namespace))
            };
            if foreign_groups::left_to_its_job(&source, job, &kueue_jobs) {
                continue;
            }
            sourced.insert(GroupKey::new(namespace.as_str(), name.as_str()));
            let existing = self
                .stores
                .pod_groups
                .get(&ObjectRef::new(name).within(namespace));
            let namespace_queue = self.stores.namespace_queue(namespace).ok().flatten();
            let plan = foreign_groups::plan(
                source,
                existing.as_deref(),
                namespace_queue.as_deref(),
                &topologies,
            );
            carry_out(plan, dialect, regarding, (&mut creations, resizes), wanted);
        }
        creations
    }

    /// Reads the workloads that control pods of groups without a PodGroup (see [`workloads`]),
    /// and the LeaderWorkerSets whose replicas they are (see [`orphans`]), unless read within
    /// [`CREATE_RETRY_AFTER`].
    pub(super) async fn read_workloads(&mut self, observation: &Observation, now: Instant) {
        self.workloads
            .retain(|_, (at, _)| now.duration_since(*at) < CREATE_RETRY_AFTER);
        let wanted: Vec<(String, Arc<model::Workload>)> = observation
            .groups
            .iter()
            .filter(|(_, view)| !view.has_pod_group)
            .filter_map(|(key, view)| {
                let asked = view.asked.as_ref()?;
                let workload = asked
                    .workload
                    .clone()
                    .or_else(|| asked.leader_worker_set.as_deref().map(leader_worker_set))?;
                Some((key.namespace.to_string(), workload))
            })
            .filter(|(namespace, w)| !self.workloads.contains_key(&workload_key(namespace, w)))
            .collect();
        let client = &self.client;
        let read: Vec<(String, Result<Arc<DynamicObject>, String>)> = futures::stream::iter(wanted)
            .map(|(namespace, w)| async move {
                let (group, version) = w.api_version.split_once('/').unwrap_or(("", ""));
                let plural = match api::workloads::kind_of(&w.api_version, &w.kind) {
                    Some(kind) => kind.plural,
                    None => api::leader_worker_set::PLURAL,
                };
                let resource = ApiResource {
                    group: group.to_owned(),
                    version: version.to_owned(),
                    api_version: w.api_version.clone(),
                    kind: w.kind.clone(),
                    plural: plural.to_owned(),
                };
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &namespace, &resource);
                let object = api
                    .get(&w.name)
                    .await
                    .map(Arc::new)
                    .map_err(|e| api_message_of(&e));
                (workload_key(&namespace, &w), object)
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for (key, object) in read {
            self.workloads.insert(key, (now, object));
        }
    }

    /// PodGroups to create for pods that ask for one, and PodGroupMissing events.
    pub(super) fn orphan_pod_groups(
        &self,
        observation: &Observation,
        job_groups: &HashSet<GroupKey>,
        (wanted, relabels): (&mut Vec<Event>, &mut Vec<Relabel>),
    ) -> Vec<Creation> {
        let mut creations = Vec::new();
        let mut keys: Vec<&GroupKey> = observation
            .groups
            .iter()
            .filter(|(key, view)| !view.has_pod_group && !job_groups.contains(key))
            .map(|(key, _)| key)
            .collect();
        keys.sort();
        for key in keys {
            let Some(asked) = &observation.groups[key].asked else {
                continue;
            };
            let in_store = self
                .stores
                .pod_groups
                .get(&ObjectRef::new(&key.name).within(&key.namespace))
                .is_some();
            if in_store {
                continue; // the cache's own watch lags behind
            }
            if let Some(Ok(tree)) = self.stores.kubernetes_tree(&key.namespace, &key.name) {
                let leaf = &key.name;
                relabels.extend(
                    asked
                        .waiting
                        .iter()
                        .map(|pod| Relabel::into_tree(pod, leaf, &tree)),
                );
                continue;
            }
            let namespace_queue = self.stores.namespace_queue(&key.namespace).ok().flatten();
            let queue = namespace_queue.as_deref();
            let planned = match &asked.workload {
                Some(workload) => self.workload_plan(key, asked, workload, queue),
                None => self.pods_plan(key, asked, queue),
            };
            let Some((plan, source, note)) = planned else {
                continue; // its workload is not read yet
            };
            match plan {
                Some(orphans::OrphanPlan::Create(group)) => creations.push(Creation {
                    note: format!("minMember {}, {note}", group.spec.min_member),
                    group: *group,
                    source,
                    regarding: asked.waiting[0].reference(),
                    warning: false,
                }),
                Some(orphans::OrphanPlan::Missing { pods, message }) => {
                    wanted.extend(pods.iter().map(|pod| Event {
                        regarding: pod.reference(),
                        warning: true,
                        reason: orphans::POD_GROUP_MISSING.to_owned(),
                        action: "WaitForPodGroup",
                        note: message.clone(),
                    }));
                }
                None => {}
            }
        }
        creations
    }

    /// The PodGroup a group whose pods a workload controls gets, sized from the workload, with
    /// the note of its Event; `None` while the workload is not read yet.
    fn workload_plan(
        &self,
        key: &GroupKey,
        asked: &Asked,
        workload: &model::Workload,
        namespace_queue: Option<&str>,
    ) -> Option<(Option<orphans::OrphanPlan>, &'static str, String)> {
        let (_, object) = self
            .workloads
            .get(&workload_key(&key.namespace, workload))?;
        let object = object.as_deref().map_err(String::as_str);
        let plan = workloads::plan(key, asked, workload, object, namespace_queue);
        let note = format!("sized from {} {}", workload.kind, workload.name);
        Some((plan, "workload", note))
    }

    /// The PodGroup a group of pods alone gets, sized from its pods' annotation (or kept whole
    /// for a LeaderWorkerSet's replica started LeaderReady), with the note of its Event; `None`
    /// while its LeaderWorkerSet is not read yet.
    fn pods_plan(
        &self,
        key: &GroupKey,
        asked: &Asked,
        namespace_queue: Option<&str>,
    ) -> Option<(Option<orphans::OrphanPlan>, &'static str, String)> {
        let set = match asked.leader_worker_set.as_deref() {
            Some(name) => {
                let read = self
                    .workloads
                    .get(&workload_key(&key.namespace, &leader_worker_set(name)));
                let (_, object) = read?;
                Some(object.as_deref().map_err(String::as_str))
            }
            None => None,
        };
        let plan = orphans::plan(key, asked, set, namespace_queue);
        let leader_ready = matches!(&plan, Some(orphans::OrphanPlan::Create(g))
            if !g.spec.min_resources.is_empty());
        let sized = format!(
            "minMember {} from the annotation {} on the group's pods",
            asked.min_member.unwrap_or(1),
            labels::MIN_MEMBER_ANNOTATION
        );
        let note = match (asked.leader_worker_set.as_deref(), set) {
            (Some(name), _) if leader_ready => format!(
                "the whole replica kept in minResources: LeaderWorkerSet {name} starts its replicas LeaderReady"
            ),
            (Some(name), Some(Err(why))) => format!(
                "{sized}; LeaderWorkerSet {name} could not be read ({why}), so a replica started LeaderReady would wait for its workers for ever"
            ),
            _ => sized,
        };
        Some((plan, "pods", note))
    }
}

/// Queues what `plan` (for a workload that gets a PodGroup: a Job, a scheduler-plugins
/// PodGroup) asks: the creation, labelled `source` for the metric, the resize, or the Conflict
/// event on `regarding`.
fn carry_out(
    plan: Option<batch_v1_jobs::JobPlan>,
    source: &'static str,
    regarding: ObjectReference,
    (creations, resizes): (&mut Vec<Creation>, &mut Vec<Resize>),
    wanted: &mut Vec<Event>,
) {
    match plan {
        Some(batch_v1_jobs::JobPlan::Create {
            group,
            note,
            warning,
        }) => creations.push(Creation {
            group: *group,
            source,
            regarding,
            note,
            warning,
        }),
        Some(batch_v1_jobs::JobPlan::Resize {
            min_member,
            sub_group_policy,
            note,
        }) => resizes.push(Resize {
            min_member,
            sub_group_policy,
            regarding,
            note,
        }),
        Some(batch_v1_jobs::JobPlan::Conflict { message }) => wanted.push(Event {
            regarding,
            warning: true,
            reason: "PodGroupConflict".to_owned(),
            action: "CreatePodGroup",
            note: message,
        }),
        None => {}
    }
}

/// The LeaderWorkerSet `name`, as a workload to read.
fn leader_worker_set(name: &str) -> Arc<model::Workload> {
    Arc::new(model::Workload {
        api_version: api::leader_worker_set::API_VERSION.to_owned(),
        kind: api::leader_worker_set::KIND.to_owned(),
        name: name.to_owned(),
        uid: String::new(),
    })
}

/// Where [`Controller::read_workloads`] keeps a workload read for a group of `namespace`: by
/// kind and name, since a workload known only by its labels has no UID.
fn workload_key(namespace: &str, workload: &model::Workload) -> String {
    format!("{namespace}/{}/{}", workload.kind, workload.name)
}

/// Each of `objects`, another scheduler's PodGroups of one `dialect`, as the controller reads
/// it, with the reference its Events are about.
fn dialect_sources<'a, K>(
    objects: &'a [Arc<K>],
    dialect: &'static str,
) -> impl Iterator<Item = (Foreign<'a>, ObjectReference, &'static str)> + 'a
where
    K: kube::Resource<DynamicType = ()> + 'a,
    Foreign<'a>: From<&'a K>,
{
    objects.iter().map(move |s| {
        (
            Foreign::from(s.as_ref()),
            events::reference(s.as_ref()),
            dialect,
        )
    })
}
