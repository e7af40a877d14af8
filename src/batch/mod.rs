//! The batch Job controller: turns each `batch.gangplank.dev` Job into its PodGroup, its pods
//! and its plugins' objects, and keeps its status, by Volcano's lifecycle.
//!
//! A reconciler per Job (kube's `Controller`) rather than the snapshot passes of
//! [`crate::controller`]: a Job's state is a function of its own PodGroup and pods, and, until
//! it starts, of the phases of the Jobs it depends on (`spec.dependsOn`, read from the Job
//! store and looked at again every few seconds while it waits for them). It reads them from its
//! own stores (pods and PodGroups labelled with the job's name, so the watches carry nothing
//! else), decides with the pure [`plan::decide_after`], and writes: the PodGroup
//! ([`objects::pod_group`], admitted ahead of its pods), the pods once the group is admitted
//! (so a waiting Job costs the API server nothing), deletions the policies ask for, and the
//! status (server-side apply). After writing it waits, with a deadline, until its stores show
//! its writes, so the next reconcile of the same Job never decides twice on the same pod.
//!
//! Writer of: Jobs' status, their pods, PodGroups, Services, ConfigMaps and Secrets. It runs only in
//! the replica that leads ([`crate::leader`]).

pub mod names;
pub mod objects;
pub mod plan;
pub mod plugins;
pub mod ssh;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::api::batch_job::{BatchJob, BatchJobStatus};
use crate::api::{PodGroup, PodGroupPhase};
use crate::controller::status;
use gangplank_core::model::PodPhase;
use names::{JOB_NAME_LABEL, JOB_VERSION_LABEL, TASK_INDEX_LABEL, TASK_NAME_LABEL};
use plan::{GroupAdmission, PodView};

/// Field manager of the Job status writes.
const FIELD_MANAGER: &str = "gangplank-batch";
/// Longest wait for the stores to show this reconcile's writes.
const SETTLE_DEADLINE: Duration = Duration::from_secs(10);
/// Pods created or deleted at once.
const WRITE_CONCURRENCY: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to {what} for Job {job}: {why}")]
    Write {
        what: String,
        job: String,
        why: kube::Error,
    },
}

struct Context {
    client: Client,
    pods: Store<Pod>,
    groups: Store<PodGroup>,
    jobs: Store<BatchJob>,
}

/// How often the controller counts its Jobs for [`Census`].
const CENSUS_EVERY: Duration = Duration::from_secs(5);

/// The batch Jobs by queue and phase, counted by the controller of the replica that leads and
/// rendered on each scrape of `/metrics` ([`crate::metrics::BATCH_JOBS`]). Writer: [`run`].
#[derive(Clone, Default)]
pub struct Census(Arc<std::sync::Mutex<BTreeMap<(String, &'static str), usize>>>);

impl Census {
    fn set(&self, counts: BTreeMap<(String, &'static str), usize>) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = counts;
    }

    /// Writes the gauge family, one series per queue and phase with Jobs in it.
    pub fn render(&self, out: &mut String) {
        let counts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let labels: Vec<([(&str, &str); 2], f64)> = counts
            .iter()
            .map(|((queue, phase), n)| ([("queue", queue.as_str()), ("phase", *phase)], *n as f64))
            .collect();
        crate::metrics::write_gauges(
            out,
            crate::metrics::BATCH_JOBS,
            labels.iter().map(|(l, n)| (&l[..], *n)),
        );
    }
}

/// Counts the Jobs of `jobs` by queue (the spec's, else their PodGroup's, else `default`) and
/// phase.
fn count(
    jobs: &Store<BatchJob>,
    groups: &Store<PodGroup>,
) -> BTreeMap<(String, &'static str), usize> {
    let mut counts = BTreeMap::new();
    for job in jobs.state() {
        let queue = objects::queue(&job).map_or_else(
            || {
                let namespace = job.namespace().unwrap_or_default();
                groups
                    .get(&ObjectRef::new(&job.name_any()).within(&namespace))
                    .map_or(crate::api::labels::DEFAULT_QUEUE.to_owned(), |g| {
                        g.spec.queue_name().to_owned()
                    })
            },
            str::to_owned,
        );
        let phase = job
            .status
            .as_ref()
            .map(|s| s.state.phase)
            .unwrap_or_default();
        *counts.entry((queue, phase.as_str())).or_default() += 1;
    }
    counts
}

/// Runs the controller until `shutdown`, counting its Jobs into `census` meanwhile (emptied
/// when it stops: a follower exports no Jobs).
pub async fn run(client: Client, census: Census, shutdown: CancellationToken) {
    let jobs: Api<BatchJob> = Api::all(client.clone());
    let labelled = watcher::Config::default().labels(JOB_NAME_LABEL);
    let (pods, pod_writer) = reflector::store();
    let pod_events = reflector::reflector(
        pod_writer,
        watcher(Api::<Pod>::all(client.clone()), labelled.clone()),
    )
    .default_backoff()
    .touched_objects();
    let (groups, group_writer) = reflector::store();
    let group_events = reflector::reflector(
        group_writer,
        watcher(Api::<PodGroup>::all(client.clone()), labelled),
    )
    .default_backoff()
    .touched_objects();
    let controller = Controller::new(jobs, watcher::Config::default());
    let context = Arc::new(Context {
        client,
        pods,
        groups,
        jobs: controller.store(),
    });
    let counting = {
        let (jobs, groups, census, shutdown) = (
            context.jobs.clone(),
            context.groups.clone(),
            census.clone(),
            shutdown.clone(),
        );
        async move {
            let mut every = tokio::time::interval(CENSUS_EVERY);
            while shutdown.run_until_cancelled(every.tick()).await.is_some() {
                census.set(count(&jobs, &groups));
            }
        }
    };
    // kube's runner never ends when it is stopped before its Job store is ready (it waits for
    // a list the shutdown has already cut off); with no list there is no reconcile in flight.
    let stopped_before_first_list = {
        let (jobs, shutdown) = (context.jobs.clone(), shutdown.clone());
        async move {
            shutdown.cancelled().await;
            if jobs.wait_until_ready().now_or_never().is_some() {
                std::future::pending::<()>().await;
            }
        }
    };
    let reconciling = controller
        .owns_stream(pod_events)
        .owns_stream(group_events)
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "batch job reconcile");
            }
        });
    let reconciling = async {
        tokio::select! {
            () = reconciling => {}
            () = stopped_before_first_list => {}
        }
    };
    tokio::join!(reconciling, counting);
    census.set(BTreeMap::new());
}

fn error_policy(_job: Arc<BatchJob>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(error = %error, "batch job");
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile(job: Arc<BatchJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (group, pods) = owned(&ctx, &namespace, &name, &uid);
    let now = Timestamp::now().as_second();
    let views: Vec<PodView> = pods.iter().filter_map(|p| pod_view(p)).collect();
    let group_view = group.as_deref().map(|g| group_view(g, now));
    let after = plan::after(&job, |other| {
        ctx.jobs
            .get(&ObjectRef::new(other).within(&namespace))
            .map(|j| j.status.as_ref().map(|s| s.state.phase).unwrap_or_default())
    });
    let decision = plan::decide_after(&job, &after, group_view.as_ref(), &views, now);
    let write = |what: &str, why: kube::Error| Error::Write {
        what: what.to_owned(),
        job: format!("{namespace}/{name}"),
        why,
    };

    if decision.delete_job {
        let api: Api<BatchJob> = Api::namespaced(ctx.client.clone(), &namespace);
        ignore_missing(api.delete(&name, &DeleteParams::background()).await)
            .map_err(|e| write("delete the finished job", e))?;
        return Ok(Action::await_change());
    }
    if decision.delete_group
        && let Some(group) = &group
    {
        delete_group(&ctx.client, group)
            .await
            .map_err(|e| write("delete the suspended job's PodGroup", e))?;
    }
    if decision.create_group {
        let group = objects::pod_group(&job);
        let api: Api<PodGroup> = Api::namespaced(ctx.client.clone(), &namespace);
        ignore_exists(api.create(&PostParams::default(), &group).await)
            .map_err(|e| write("create the PodGroup", e))?;
    }
    let mut status = decision.status.clone();
    if !decision.create.is_empty() {
        create_plugin_objects(&ctx.client, &job, &namespace, &mut status)
            .await
            .map_err(|e| write("create the plugins' objects", e))?;
    }
    let version = status.version;
    let made: Vec<Pod> = decision
        .create
        .iter()
        .map(|n| objects::pod(&job, n.task, n.index, version))
        .collect();
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let made_names: Vec<String> = made.iter().map(ResourceExt::name_any).collect();
    create_pods(&pod_api, made)
        .await
        .map_err(|e| write("create pods", e))?;
    delete_pods(&pod_api, decision.delete.clone())
        .await
        .map_err(|e| write("delete pods", e))?;

    let mut written = None;
    if job.status.as_ref() != Some(&status) {
        written = write_status(&ctx.client, &namespace, &name, &status)
            .await
            .map_err(|e| write("write the status", e))?;
    }
    settle(
        &ctx,
        &job,
        &namespace,
        &made_names,
        &decision.delete,
        written,
    )
    .await;
    Ok(match decision.recheck_after {
        Some(seconds) => Action::requeue(Duration::from_secs(seconds.max(1))),
        None => Action::requeue(Duration::from_secs(300)),
    })
}

/// The PodGroup of the job `namespace`/`name` (uid `uid`) and its pods, as the stores show
/// them: only those the job controls.
fn owned(
    ctx: &Context,
    namespace: &str,
    name: &str,
    uid: &str,
) -> (Option<Arc<PodGroup>>, Vec<Arc<Pod>>) {
    let ours =
        |owners: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>| {
            owners
                .into_iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        };
    let group = ctx
        .groups
        .get(&ObjectRef::new(name).within(namespace))
        .filter(|g| ours(g.metadata.owner_references.as_ref()));
    let pods: Vec<Arc<Pod>> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|p| {
            p.namespace().as_deref() == Some(namespace)
                && p.labels().get(JOB_NAME_LABEL).map(String::as_str) == Some(name)
                && ours(p.metadata.owner_references.as_ref())
        })
        .collect();
    (group, pods)
}

/// Deletes `group`, the one seen (its uid a precondition); gone already is done.
async fn delete_group(client: &Client, group: &PodGroup) -> Result<(), kube::Error> {
    let api: Api<PodGroup> =
        Api::namespaced(client.clone(), &group.namespace().unwrap_or_default());
    let params = DeleteParams {
        preconditions: group
            .metadata
            .uid
            .clone()
            .map(|uid| kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
        ..DeleteParams::background()
    };
    ignore_missing(api.delete(&group.name_any(), &params).await.map(|_| ()))
}

/// Creates `pods`, a few at a time; one that exists already is done.
async fn create_pods(api: &Api<Pod>, pods: Vec<Pod>) -> Result<(), kube::Error> {
    futures::stream::iter(pods)
        .map(|pod| async move { ignore_exists(api.create(&PostParams::default(), &pod).await) })
        .buffer_unordered(WRITE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}

/// Deletes the pods named `names`, a few at a time; one gone already is done.
async fn delete_pods(api: &Api<Pod>, names: Vec<String>) -> Result<(), kube::Error> {
    futures::stream::iter(names)
        .map(|pod| async move { ignore_missing(api.delete(&pod, &DeleteParams::default()).await) })
        .buffer_unordered(WRITE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}

/// Writes the job's `status` (server-side apply); the resource version it was written at.
async fn write_status(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &BatchJobStatus,
) -> Result<Option<String>, kube::Error> {
    let api: Api<BatchJob> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({
        "apiVersion": crate::api::batch_job::API_VERSION,
        "kind": "Job",
        "status": status,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let after = api
        .patch_status(name, &params, &Patch::Apply(&patch))
        .await?;
    Ok(after.metadata.resource_version)
}

/// Waits, at most [`SETTLE_DEADLINE`], until the stores show the pods created and deleted and
/// the status written at `written`.
async fn settle(
    ctx: &Context,
    job: &BatchJob,
    namespace: &str,
    created: &[String],
    deleted: &[String],
    written: Option<String>,
) {
    let shown = || {
        let pod = |name: &str| ctx.pods.get(&ObjectRef::new(name).within(namespace));
        created.iter().all(|name| pod(name).is_some())
            && deleted
                .iter()
                .all(|name| pod(name).is_none_or(|p| p.metadata.deletion_timestamp.is_some()))
            && written.as_ref().is_none_or(|rv| {
                ctx.jobs
                    .get(&ObjectRef::from_obj(job))
                    .is_none_or(|j| j.metadata.resource_version.as_ref() == Some(rv))
            })
    };
    let deadline = tokio::time::Instant::now() + SETTLE_DEADLINE;
    while !shown() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates the plugins' Service, ConfigMap and ssh Secret if missing (an existing Secret keeps
/// its key), and records them in `status`.
async fn create_plugin_objects(
    client: &Client,
    job: &BatchJob,
    namespace: &str,
    status: &mut BatchJobStatus,
) -> Result<(), kube::Error> {
    let (service, config_map) = plugins::objects(job);
    if let Some(service) = service {
        let api: Api<Service> = Api::namespaced(client.clone(), namespace);
        ignore_exists(api.create(&PostParams::default(), &service).await)?;
        status
            .controlled_resources
            .insert("plugin-svc".into(), service.name_any());
    }
    if job.spec.plugins.contains_key("ssh") {
        let mut seed = [0u8; 32];
        let mut check = [0u8; 4];
        let random = ring::rand::SystemRandom::new();
        ring::rand::SecureRandom::fill(&random, &mut seed)
            .and_then(|()| ring::rand::SecureRandom::fill(&random, &mut check))
            .expect("the system's random source works");
        let secret = ssh::secret(job, &seed, u32::from_be_bytes(check));
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        ignore_exists(api.create(&PostParams::default(), &secret).await)?;
        status
            .controlled_resources
            .insert("plugin-ssh".into(), secret.name_any());
    }
    if let Some(config_map) = config_map {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        ignore_exists(api.create(&PostParams::default(), &config_map).await)?;
        status
            .controlled_resources
            .insert("plugin-svc-hosts".into(), config_map.name_any());
    }
    Ok(())
}

/// One of the job's pods as [`plan::decide`] reads it; `None` for a pod without the job's
/// labels (not made by this controller).
fn pod_view(pod: &Pod) -> Option<PodView> {
    let labels = pod.labels();
    let status = pod.status.as_ref();
    let exit_code = status
        .into_iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref())
        .map(|t| t.exit_code)
        .find(|code| *code != 0);
    Some(PodView {
        name: pod.name_any(),
        task: labels.get(TASK_NAME_LABEL)?.clone(),
        index: labels.get(TASK_INDEX_LABEL)?.parse().ok()?,
        version: labels.get(JOB_VERSION_LABEL)?.parse().ok()?,
        phase: PodPhase::of(status.and_then(|s| s.phase.as_deref())),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        evicted: status
            .into_iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .any(|c| c.type_ == "DisruptionTarget" && c.status == "True"),
        exit_code,
        created: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
    })
}

/// The job's PodGroup as [`plan::decide`] reads it at `now` (Unix seconds).
fn group_view(group: &PodGroup, now: i64) -> GroupAdmission {
    let ahead = status::ahead(group, now) == Some(status::Ahead::Holds);
    let status = group.status.as_ref();
    let released = status.is_some_and(|s| {
        matches!(s.phase, PodGroupPhase::Inqueue | PodGroupPhase::Running) && s.admitted > 0
    });
    let waiting = status
        .into_iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| c.type_ == status::ADMITTED && c.status == "False")
        .map(|c| c.message.clone());
    GroupAdmission {
        admitted: ahead || released,
        waiting,
    }
}

fn ignore_exists<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

fn ignore_missing<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client whose API server accepts every request and never answers it, as one does that
    /// is still listing when the leader it serves is told to stop.
    fn a_client_that_never_hears_back() -> Client {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| {
            std::future::pending::<Result<http::Response<kube::client::Body>, std::io::Error>>()
        });
        Client::new(service, "default")
    }

    #[tokio::test(start_paused = true)]
    async fn the_controller_stops_at_shutdown_even_before_its_first_list_of_jobs_has_arrived() {
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(run(
            a_client_that_never_hears_back(),
            Census::default(),
            shutdown.clone(),
        ));
        tokio::task::yield_now().await;
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(60), running)
            .await
            .expect("the batch Job controller did not stop within 60 s of shutdown")
            .unwrap();
    }
}
