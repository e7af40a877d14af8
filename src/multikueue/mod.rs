//! Gangplank as MultiKueue's dispatcher (`--multikueue-dispatcher`, on a MultiKueue manager
//! whose Kueue names [`DISPATCHER_NAME`] as its `multiKueue.dispatcherName`; see
//! docs/multi-cluster.md). For each Workload MultiKueue waits to dispatch, it nominates the
//! workers of the Workload's MultiKueueConfig that can hold the whole gang now, by the core's
//! fit ([`gangplank_core::policy::cluster_fit`]) over each worker's nodes and pods
//! ([`workers`]); Kueue then copies the Workload to those workers only. The Workloads of a round
//! are decided in turn, each gang's room held on the workers it is nominated to before the next
//! is asked ([`nominate::in_turn`]). When none can, it nominates none and says why, worker by
//! worker, in an Event on the Workload.
//!
//! [`run`]'s loop is the one writer of the Workloads' `status.nominatedClusterNames` and of the
//! worker connections; the decisions are pure ([`nominate`]).

mod nominate;
mod patch;
mod workers;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::api::kueue::KueueWorkload;
use crate::api::multikueue::{CONTROLLER_NAME, MultiKueueCluster, MultiKueueConfig};
use crate::cache::stores::Stores;
use crate::events::{self, Event, Limiter, Publisher};
use nominate::{Decision, Waiting, Worker, dispatchable, in_turn};
use workers::Workers;

/// The `multiKueue.dispatcherName` of a Kueue whose Workloads Gangplank nominates workers for.
pub const DISPATCHER_NAME: &str = "scheduling.gangplank.dev/fit";

/// How often the dispatcher looks at the Workloads and the workers.
const ROUND: Duration = Duration::from_secs(2);

/// Most Events about Workloads no worker can hold, per round.
const EVENTS_PER_ROUND: usize = 20;

/// Where Kueue keeps the workers' kubeconfig Secrets.
#[derive(Debug, Clone)]
pub struct Settings {
    pub kueue_namespace: String,
}

/// Nominates workers for the Workloads MultiKueue waits to dispatch, every [`ROUND`], until
/// `shutdown`. A failed API call is logged and tried again next round.
pub async fn run(
    client: Client,
    stores: Arc<Stores>,
    settings: Settings,
    shutdown: CancellationToken,
) {
    let mut dispatcher = Dispatcher {
        client: client.clone(),
        workers: Workers::default(),
        limiter: Limiter::default(),
        publisher: Publisher::new(client),
        settings,
    };
    let mut tick = tokio::time::interval(ROUND);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = dispatcher.round(&stores, &shutdown).await {
            tracing::warn!(error = %e, "multikueue dispatcher: round failed; trying again");
        }
    }
}

struct Dispatcher {
    client: Client,
    workers: Workers,
    limiter: Limiter,
    publisher: Publisher,
    settings: Settings,
}

impl Dispatcher {
    async fn round(
        &mut self,
        stores: &Stores,
        shutdown: &CancellationToken,
    ) -> Result<(), kube::Error> {
        // Each MultiKueue check by name, with its MultiKueueConfig's name.
        let checks: HashMap<String, String> = stores
            .kueue_admission_checks
            .state()
            .iter()
            .filter(|c| c.spec.controller_name == CONTROLLER_NAME)
            .filter_map(|c| Some((c.name_any(), c.spec.parameters.as_ref()?.name.clone())))
            .collect();
        let waiting: Vec<(Arc<KueueWorkload>, String)> = stores
            .kueue_workloads
            .state()
            .into_iter()
            .filter_map(|w| {
                let config = dispatchable(&w, &checks)?.to_owned();
                Some((w, config))
            })
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        let configs: HashMap<String, Vec<String>> =
            Api::<MultiKueueConfig>::all(self.client.clone())
                .list(&ListParams::default())
                .await?
                .into_iter()
                .map(|c| (c.name_any(), c.spec.clusters))
                .collect();
        let clusters = Api::<MultiKueueCluster>::all(self.client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let namespace = self.settings.kueue_namespace.clone();
        self.workers
            .sync(&self.client, &namespace, &clusters, shutdown)
            .await;
        let mut states: HashMap<String, Worker> = HashMap::new();
        let waiting: Vec<Waiting<Arc<KueueWorkload>>> = waiting
            .into_iter()
            .map(|(workload, config)| {
                let listed = configs.get(&config).cloned().unwrap_or_default();
                for worker in &listed {
                    states.entry(worker.clone()).or_insert_with(|| {
                        Worker::new(self.workers.state(worker).map_err(|e| e.to_string()))
                    });
                }
                Waiting { workload, listed }
            })
            .collect();
        let mut events = Vec::new();
        for (workload, Decision { nominate, waits }) in in_turn(waiting, &mut states) {
            if let Some(names) = nominate {
                self.nominate(&workload, &names).await?;
            }
            if let Some(note) = waits {
                events.push(Event {
                    regarding: events::reference(workload.as_ref()),
                    warning: false,
                    reason: "NoWorkerFits".into(),
                    action: "NominateWorkers",
                    note,
                });
            }
        }
        let now = tokio::time::Instant::now();
        for event in self.limiter.admit(events, EVENTS_PER_ROUND, now) {
            if let Err(e) = self.publisher.publish(&event).await {
                tracing::warn!(error = %e, "multikueue dispatcher: Event not written");
            }
        }
        Ok(())
    }

    /// Writes `names` as the Workload's nominated workers, as Kueue's own dispatchers do.
    async fn nominate(
        &self,
        workload: &KueueWorkload,
        names: &[String],
    ) -> Result<(), kube::Error> {
        let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload");
        let namespace = workload.namespace().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &namespace,
            &ApiResource::from_gvk(&gvk),
        );
        let current = api.get(&workload.name_any()).await?;
        let body = patch::nomination(&serde_json::to_value(&current).unwrap_or_default(), names);
        let params = PatchParams::apply(patch::FIELD_MANAGER).force();
        api.patch_status(&workload.name_any(), &params, &Patch::Apply(body))
            .await?;
        tracing::info!(
            workload = %format!("{namespace}/{}", workload.name_any()),
            workers = ?names,
            "multikueue dispatcher: nominated"
        );
        Ok(())
    }
}
