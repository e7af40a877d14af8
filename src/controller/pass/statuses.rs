//! The pass's statuses: what PodGroups, Queues and Volcano PodGroups should show, compared with
//! what is stored and with the write memory, and the waits they report.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use super::super::observe::{GroupCounts, Observation};
use super::super::status::{Finisher, Inputs};
use super::super::waits::Wait;
use super::super::{Controller, StatusWrite};
use super::super::{batch_v1_jobs, foreign_groups, queues, status, waits};
use super::due_write;
use crate::api::volcano::VolcanoPodGroupStatus;
use crate::api::{self, PodGroup, PodGroupStatus, Queue, QueueStatus};
use crate::events::{self};
use gangplank_core::admit::plan;
use gangplank_core::model::GroupKey;

impl Controller {
    /// The PodGroup statuses to write, and every group's phase counted per queue; adds the
    /// waiting groups to `waits`, and the desired status of the groups Volcano PodGroups and
    /// Kueue Workloads control to `mirrored` (which their sources' statuses follow).
    pub(super) fn pod_group_statuses(
        &mut self,
        observation: &Observation,
        admission_waits: &HashMap<GroupKey, (&'static str, String)>,
        wall: &Time,
        now: Instant,
        due: &mut Option<Instant>,
        (waits, mirrored): (&mut Vec<Wait>, &mut HashMap<GroupKey, PodGroupStatus>),
    ) -> (
        Vec<StatusWrite<PodGroupStatus>>,
        HashMap<String, GroupCounts>,
    ) {
        let mut out = Vec::new();
        let mut counts: HashMap<String, GroupCounts> = HashMap::new();
        for group in self.stores.pod_groups.state() {
            let (Some(namespace), Some(uid)) = (group.namespace(), group.uid()) else {
                continue;
            };
            let name = group.name_any();
            let key = GroupKey::new(namespace.clone(), name.clone());
            let view = observation.groups.get(&key);
            let finisher = self.finisher(&group, &namespace);
            let min_member = group.spec.min_member.max(1).unsigned_abs();
            let inputs = Inputs {
                min_member,
                members: view.map(|v| v.members).unwrap_or_default(),
                finisher: &finisher,
                admission_wait: admission_waits
                    .get(&key)
                    .map(|(reason, why)| (*reason, why.as_str())),
                placement_wait: view.and_then(|v| v.wait_reason.as_deref()),
                ahead: status::ahead(&group, wall.0.as_second()),
                kept: view.and_then(|v| v.kept.as_ref()),
            };
            let stored = group.status.as_ref();
            let previous = self.pod_group_writes.previous(&uid, stored);
            let desired = status::pod_group_status(&inputs, previous, wall);
            let previous_phase = previous.map(|p| p.phase).unwrap_or_default();
            waits.extend(waits::wait(
                key.clone(),
                events::reference(group.as_ref()),
                &desired,
            ));
            counts
                .entry(group.spec.queue_name().to_owned())
                .or_default()
                .add(desired.phase);
            if api::volcano::controls(&group) || api::kueue::controls(&group) {
                mirrored.insert(key.clone(), desired.clone());
            }
            out.extend(due_write(
                self.pod_group_writes.decide(&uid, stored, &desired, now),
                due,
                || StatusWrite {
                    uid,
                    namespace: Some(namespace),
                    name,
                    status: desired,
                    transition: Some((
                        previous_phase,
                        min_member,
                        events::reference(group.as_ref()),
                    )),
                },
            ))
        }
        (out, counts)
    }

    /// Who finishes `group`: its controlling Job, when the store has that Job.
    pub(super) fn finisher(&self, group: &PodGroup, namespace: &str) -> Finisher {
        let Some(owner) = batch_v1_jobs::controller_job(group) else {
            return Finisher::Members;
        };
        match self
            .stores
            .jobs
            .get(&ObjectRef::<Job>::new(&owner.name).within(namespace))
        {
            Some(job) if job.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
                Finisher::Job(batch_v1_jobs::state(&job))
            }
            // The Job is gone and the garbage collector will delete the group: judge by pods.
            _ => Finisher::Members,
        }
    }

    pub(super) fn queue_statuses(
        &mut self,
        observation: &Observation,
        shares: &BTreeMap<String, plan::QueueReport>,
        counts: &HashMap<String, GroupCounts>,
        (now, wall): (Instant, &Time),
        due: &mut Option<Instant>,
    ) -> Vec<StatusWrite<QueueStatus>> {
        let mut out = Vec::new();
        for queue in self.stores.queues.state() {
            let Some(uid) = queue.uid() else { continue };
            let name = queue.name_any();
            let usage = observation.queues.get(&name).cloned().unwrap_or_default();
            let desired = queues::queue_status(
                &queue,
                &usage,
                shares.get(&name),
                counts.get(&name).copied().unwrap_or_default(),
                wall,
            );
            let stored = owned_queue_status(&queue);
            out.extend(due_write(
                self.queue_writes
                    .decide(&uid, stored.as_ref(), &desired, now),
                due,
                || StatusWrite {
                    uid,
                    namespace: None,
                    name,
                    status: desired,
                    transition: None,
                },
            ))
        }
        out
    }

    /// The Volcano PodGroup statuses to write: each says what the Gangplank PodGroup made for
    /// it says (`desired`, by key, for the groups Volcano PodGroups control).
    pub(super) fn volcano_statuses(
        &mut self,
        desired: &HashMap<GroupKey, PodGroupStatus>,
        now: Instant,
        due: &mut Option<Instant>,
    ) -> Vec<StatusWrite<VolcanoPodGroupStatus>> {
        let mut out = Vec::new();
        for source in self.stores.volcano_pod_groups.state() {
            let (Some(namespace), Some(uid)) = (source.namespace(), source.uid()) else {
                continue;
            };
            let name = source.name_any();
            let Some(group) = desired.get(&GroupKey::new(namespace.as_str(), name.as_str())) else {
                continue;
            };
            let status = foreign_groups::volcano_status(group);
            out.extend(due_write(
                self.volcano_writes
                    .decide(&uid, source.status.as_ref(), &status, now),
                due,
                || StatusWrite {
                    uid,
                    namespace: Some(namespace),
                    name,
                    status,
                    transition: None,
                },
            ))
        }
        out
    }
}

/// The part of a Queue's status the controller writes (everything but `conditions`).
pub(super) fn owned_queue_status(queue: &Queue) -> Option<QueueStatus> {
    queue.status.clone().map(|mut s| {
        s.conditions.clear();
        s
    })
}

/// `now` without its fraction of a second: the API stores times in whole seconds, and a
/// status compared with what was stored must not differ by nanoseconds.
pub(super) fn whole_seconds(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}
