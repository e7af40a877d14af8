//! The pass's writes to Kueue (`crate::api::kueue`): the state of Gangplank's check on each
//! Workload that waits on it, which follows the Gangplank PodGroup made for the Workload, and
//! the `Active` condition of Gangplank's AdmissionChecks, without which Kueue uses no
//! ClusterQueue that lists them.
//!
//! A check that was `Ready` never goes back to `Pending`: when the gang's admission lapses
//! (its pods did not come within its schedule timeout), the check says `Retry`, so Kueue
//! evicts the Workload, gives its quota back and queues it again, rather than leaving it
//! admitted with no room behind it.

use std::collections::HashMap;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use super::super::writes::WriteDue;
use super::super::{Controller, StatusWrite, WRITE_CONCURRENCY};
use super::due_write;
use crate::api::kueue::{self, AdmissionCheckState, KueueAdmissionCheck, KueueWorkload};
use crate::api::{PodGroup, PodGroupStatus};
use crate::metrics;
use gangplank_core::model::GroupKey;

/// The field manager of Gangplank's writes to Kueue's objects.
const FIELD_MANAGER: &str = "gangplank";

impl Controller {
    /// The check states to write: for each Workload waiting on one of Gangplank's checks whose
    /// PodGroup the pass computed (`desired`, by key), what that PodGroup says.
    pub(super) fn kueue_checks(
        &mut self,
        desired: &HashMap<GroupKey, PodGroupStatus>,
        now: Instant,
        due: &mut Option<Instant>,
    ) -> Vec<StatusWrite<AdmissionCheckState>> {
        let ours = self.stores.kueue_checks_of_ours();
        let mut out = Vec::new();
        for workload in self.stores.kueue_workloads.state() {
            let (Some(namespace), Some(uid)) = (workload.namespace(), workload.uid()) else {
                continue;
            };
            let Some(stored) = workload.our_check(&|name| ours.contains(name)) else {
                continue;
            };
            let name = workload.name_any();
            let Some((state, message)) = self.kueue_check(&workload, &namespace, desired) else {
                continue;
            };
            let (state, message) = if state == "Pending" && stored.state == "Ready" {
                ("Retry", format!("the gang's admission lapsed: {message}"))
            } else {
                (state, message)
            };
            let check = AdmissionCheckState {
                name: stored.name.clone(),
                state: state.to_owned(),
                message,
            };
            out.extend(due_write(
                self.kueue_writes.decide(&uid, Some(stored), &check, now),
                due,
                || StatusWrite {
                    uid,
                    namespace: Some(namespace),
                    name,
                    status: check,
                    transition: None,
                },
            ))
        }
        out
    }

    /// What Gangplank's check says of `workload` in `namespace`: `Rejected` when its gang is
    /// larger than Gangplank's largest; else what the PodGroup made for it says (`desired`),
    /// once there is one.
    fn kueue_check(
        &self,
        workload: &KueueWorkload,
        namespace: &str,
        desired: &HashMap<GroupKey, PodGroupStatus>,
    ) -> Option<(&'static str, String)> {
        if !workload.has_quota_reserved() {
            return None;
        }
        if let Some(why) = workload.too_large() {
            return Some(("Rejected", why));
        }
        let name = workload.name_any();
        let status = desired.get(&GroupKey::new(namespace, name.as_str()))?;
        let group = self
            .stores
            .pod_groups
            .get(&ObjectRef::<PodGroup>::new(&name).within(namespace));
        let min_member = group.map_or(0, |g| g.spec.min_member);
        Some(kueue::check_state(status, min_member))
    }

    /// Writes each check state into its Workload's `status.admissionChecks` by server-side
    /// apply (the list is keyed by name, so Kueue's other checks are left alone), forced, as
    /// Kueue's own check controllers write theirs.
    pub(super) async fn write_kueue_checks(
        &mut self,
        writes: Vec<StatusWrite<AdmissionCheckState>>,
        now: Instant,
    ) {
        let client = &self.client;
        let at = Timestamp::now().to_string();
        let results: Vec<(StatusWrite<AdmissionCheckState>, bool)> =
            futures::stream::iter(writes)
                .map(|w| {
                    let at = at.clone();
                    async move {
                        let namespace = w.namespace.as_deref().unwrap_or_default();
                        let api: Api<KueueWorkload> = Api::namespaced(client.clone(), namespace);
                        let body = serde_json::json!({
                            "apiVersion": kueue::API_VERSION, "kind": "Workload",
                            "metadata": {"name": w.name, "namespace": namespace},
                            "status": {"admissionChecks": [{
                                "name": w.status.name, "state": w.status.state,
                                "message": w.status.message, "lastTransitionTime": at}]}});
                        let params = PatchParams::apply(FIELD_MANAGER).force();
                        let result = api.patch_status(&w.name, &params, &Patch::Apply(body)).await;
                        if let Err(e) = &result {
                            tracing::warn!(error = %e, workload = %w.name, "controller: Kueue admission check");
                        }
                        let ok = result.is_ok();
                        ::metrics::counter!(metrics::CONTROLLER_STATUS_WRITES_TOTAL, "kind" => "kueue-workload", "outcome" => if ok { "ok" } else { "error" })
                            .increment(1);
                        (w, ok)
                    }
                })
                .buffer_unordered(WRITE_CONCURRENCY)
                .collect()
                .await;
        for (w, ok) in results {
            self.kueue_writes.record(&w.uid, w.status, ok, now);
        }
    }

    /// Marks Gangplank's AdmissionChecks `Active` where they are not.
    pub(super) async fn activate_kueue_checks(&mut self, now: Instant) {
        let inactive: Vec<_> = self
            .stores
            .kueue_admission_checks
            .state()
            .into_iter()
            .filter(|c| c.spec.controller_name == kueue::CONTROLLER_NAME && !is_active(c))
            .filter(|c| {
                c.uid().is_some_and(|uid| {
                    !matches!(
                        self.kueue_activations
                            .decide(&uid, Some(&false), &true, now),
                        WriteDue::InSync | WriteDue::Wait(_)
                    )
                })
            })
            .collect();
        let api: Api<KueueAdmissionCheck> = Api::all(self.client.clone());
        for check in inactive {
            let name = check.name_any();
            let body = serde_json::json!({
                "apiVersion": kueue::API_VERSION, "kind": "AdmissionCheck",
                "metadata": {"name": name},
                "status": {"conditions": [{
                    "type": "Active", "status": "True", "reason": "Active",
                    "message": "Gangplank checks that each Workload's whole gang fits before Kueue admits it",
                    "lastTransitionTime": Timestamp::now().to_string(),
                    "observedGeneration": check.metadata.generation.unwrap_or(0)}]}});
            let params = PatchParams::apply(FIELD_MANAGER).force();
            let result = api.patch_status(&name, &params, &Patch::Apply(body)).await;
            if let Err(e) = &result {
                tracing::warn!(error = %e, check = %name, "controller: Kueue AdmissionCheck");
            }
            let uid = check.uid().unwrap_or_default();
            self.kueue_activations
                .record(&uid, true, result.is_ok(), now);
        }
    }
}

/// Whether `check`'s `Active` condition is `True`.
fn is_active(check: &KueueAdmissionCheck) -> bool {
    check.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Active" && c.status == "True")
    })
}
