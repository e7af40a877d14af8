//! The Job plugins, as Volcano spells them and their arguments: what each injects into the
//! job's pods ([`inject`]) and the objects it makes beside them ([`objects`]). Pure functions
//! of the Job.
//!
//! - `env`: `VK_TASK_INDEX` and `VC_TASK_INDEX` in every container.
//! - `svc`: a headless Service named after the job (`--publish-not-ready-addresses`), each pod's
//!   host name `<pod>.<job>`, and a ConfigMap `<job>-svc` mounted at `/etc/volcano` with each
//!   task's host names (`<task>.host`) and count (`<task>.num`), also as `VC_<TASK>_HOSTS` and
//!   `VC_<TASK>_NUM`. Turned on by `pytorch`, `tensorflow` and `mpi` too.
//! - `pytorch` (`--master`, `--worker`, `--port`, defaults `master`, `worker`, 23456):
//!   `MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE` and `RANK` (the master 0, workers after it).
//! - `tensorflow` (`--ps`, `--worker`, `--chief`, `--evaluator`, `--port`, default port 2222):
//!   `TF_CONFIG` with the cluster's hosts and the pod's task and index.
//! - `mpi` (`--master`, `--worker`, `--port`, defaults `master`, `worker`, 22): `MPI_HOST`, the
//!   workers' host names, comma separated.
//! - `ssh` (`--ssh-key-file-path`, default `/root/.ssh`): the job's key pair ([`super::ssh`]),
//!   a Secret mounted there in every container, so the pods log into each other.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EnvVar, Pod, SecretVolumeSource, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::json;

use super::names::{JOB_NAME_LABEL, owned_by, pod_name};
use crate::api::batch_job::BatchJob;

/// Every plugin Gangplank knows.
pub const PLUGINS: [&str; 6] = ["env", "svc", "ssh", "pytorch", "tensorflow", "mpi"];

/// Where the `svc` plugin mounts its ConfigMap.
pub const HOSTS_DIRECTORY: &str = "/etc/volcano";

/// A plugin's `--name=value` argument, or `default`.
fn arg<'a>(args: &'a [String], name: &str, default: &'a str) -> &'a str {
    args.iter()
        .find_map(|a| a.strip_prefix("--")?.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or(default)
}

/// Whether the job's pods get host names and the hosts ConfigMap.
pub fn svc_on(job: &BatchJob) -> bool {
    ["svc", "pytorch", "tensorflow", "mpi"]
        .iter()
        .any(|p| job.spec.plugins.contains_key(*p))
}

/// `<pod>.<job>`: a pod's host name under the job's headless Service.
fn host(job: &str, task: &str, index: i32) -> String {
    format!("{}.{job}", pod_name(job, task, index))
}

fn hosts(job: &BatchJob, task: &str) -> Vec<String> {
    let name = job.name_any();
    let replicas = replicas(job, task);
    (0..replicas).map(|i| host(&name, task, i)).collect()
}

/// The replicas of `task`, at most [`gangplank_core::limits::MAX_MEMBERS`]: the most pods the
/// controller makes of a task ([`super::plan`]).
fn replicas(job: &BatchJob, task: &str) -> i32 {
    job.spec
        .tasks
        .iter()
        .find(|t| t.name == task)
        .map_or(0, |t| {
            t.replicas
                .clamp(0, gangplank_core::limits::MAX_MEMBERS as i32)
        })
}

/// `VC_<TASK>_...`: the task's name in capitals, `-` as `_`.
fn env_name(task: &str, what: &str) -> String {
    format!("VC_{}_{what}", task.to_uppercase().replace('-', "_"))
}

/// Adds what the job's plugins give pod `index` of task number `task`.
pub fn inject(job: &BatchJob, task: usize, index: i32, pod: &mut Pod) {
    let plugins = &job.spec.plugins;
    let job_name = job.name_any();
    let task_name = job.spec.tasks[task].name.clone();
    let mut env: Vec<(String, String)> = Vec::new();
    if plugins.contains_key("env") {
        env.push(("VK_TASK_INDEX".into(), index.to_string()));
        env.push(("VC_TASK_INDEX".into(), index.to_string()));
    }
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if svc_on(job) {
        spec.hostname = Some(pod_name(&job_name, &task_name, index));
        spec.subdomain = Some(job_name.clone());
        for t in &job.spec.tasks {
            env.push((env_name(&t.name, "HOSTS"), hosts(job, &t.name).join(",")));
            env.push((env_name(&t.name, "NUM"), t.replicas.max(0).to_string()));
        }
        mount(
            spec,
            Volume {
                name: "job-hosts".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: format!("{job_name}-svc"),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
            HOSTS_DIRECTORY,
        );
    }
    if let Some(args) = plugins.get("ssh") {
        let path = arg(args, "ssh-key-file-path", super::ssh::SSH_DIRECTORY);
        mount(
            spec,
            Volume {
                name: "job-ssh".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(super::ssh::secret_name(job)),
                    default_mode: Some(0o600),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            },
            path,
        );
    }
    if let Some(args) = plugins.get("pytorch") {
        let master = arg(args, "master", "master");
        let worker = arg(args, "worker", "worker");
        let port = arg(args, "port", "23456");
        let masters = replicas(job, master);
        let rank = if task_name == master {
            Some(index)
        } else if task_name == worker {
            Some(masters.saturating_add(index))
        } else {
            None
        };
        if let Some(rank) = rank {
            env.push(("MASTER_ADDR".into(), host(&job_name, master, 0)));
            env.push(("MASTER_PORT".into(), port.into()));
            env.push((
                "WORLD_SIZE".into(),
                masters.saturating_add(replicas(job, worker)).to_string(),
            ));
            env.push(("RANK".into(), rank.to_string()));
        }
    }
    if let Some(args) = plugins.get("tensorflow") {
        let port = arg(args, "port", "2222");
        let mut cluster = BTreeMap::new();
        let mut role = None;
        for kind in ["ps", "worker", "chief", "evaluator"] {
            let t = arg(args, kind, kind);
            if replicas(job, t) == 0 {
                continue;
            }
            let list: Vec<String> = hosts(job, t)
                .iter()
                .map(|h| format!("{h}:{port}"))
                .collect();
            cluster.insert(kind, list);
            if t == task_name {
                role = Some(kind);
            }
        }
        if let Some(kind) = role {
            let config = json!({"cluster": cluster, "task": {"type": kind, "index": index}});
            env.push(("TF_CONFIG".into(), config.to_string()));
        }
    }
    if let Some(args) = plugins.get("mpi") {
        let worker = arg(args, "worker", "worker");
        env.push(("MPI_HOST".into(), hosts(job, worker).join(",")));
    }
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for container in containers {
        set_env(container, &env);
    }
}

/// Adds `volume` to the pod and mounts it at `path` in every container.
fn mount(spec: &mut k8s_openapi::api::core::v1::PodSpec, volume: Volume, path: &str) {
    for container in &mut spec.containers {
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: volume.name.clone(),
                mount_path: path.to_owned(),
                ..VolumeMount::default()
            });
    }
    spec.volumes.get_or_insert_with(Vec::new).push(volume);
}

/// Sets `env` in `container`, replacing variables of the same names.
fn set_env(container: &mut Container, env: &[(String, String)]) {
    let vars = container.env.get_or_insert_with(Vec::new);
    for (name, value) in env {
        vars.retain(|v| &v.name != name);
        vars.push(EnvVar {
            name: name.clone(),
            value: Some(value.clone()),
            value_from: None,
        });
    }
}

/// The objects the job's plugins make: with `svc`, the headless Service and the hosts
/// ConfigMap.
pub fn objects(job: &BatchJob) -> (Option<Service>, Option<ConfigMap>) {
    if !svc_on(job) {
        return (None, None);
    }
    let name = job.name_any();
    let meta = |name: String| ObjectMeta {
        name: Some(name),
        namespace: job.namespace(),
        owner_references: Some(vec![owned_by(job)]),
        labels: Some(BTreeMap::from([(
            JOB_NAME_LABEL.to_owned(),
            job.name_any(),
        )])),
        ..ObjectMeta::default()
    };
    let publish = job
        .spec
        .plugins
        .get("svc")
        .is_some_and(|args| arg(args, "publish-not-ready-addresses", "false") == "true");
    let service = Service {
        metadata: meta(name.clone()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(BTreeMap::from([(JOB_NAME_LABEL.to_owned(), name.clone())])),
            publish_not_ready_addresses: Some(publish),
            ports: Some(vec![ServicePort {
                name: Some("placeholder".into()),
                port: 1,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    let mut data = BTreeMap::new();
    for t in &job.spec.tasks {
        data.insert(format!("{}.host", t.name), hosts(job, &t.name).join("\n"));
        data.insert(format!("{}.num", t.name), t.replicas.max(0).to_string());
    }
    let config_map = ConfigMap {
        metadata: meta(format!("{name}-svc")),
        data: Some(data),
        ..ConfigMap::default()
    };
    (Some(service), Some(config_map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::batch_job::{BatchJobSpec, TaskSpec};
    use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};

    fn job(plugins: &[(&str, &[&str])]) -> BatchJob {
        let container = Container {
            name: "main".into(),
            ..Container::default()
        };
        let task = |name: &str, replicas| TaskSpec {
            name: name.into(),
            replicas,
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![container.clone()],
                    ..PodSpec::default()
                }),
            },
            ..TaskSpec::default()
        };
        let mut job = BatchJob::new(
            "train",
            BatchJobSpec {
                plugins: plugins
                    .iter()
                    .map(|(p, args)| (p.to_string(), args.iter().map(|a| a.to_string()).collect()))
                    .collect(),
                queue: Some("q".into()),
                ..BatchJobSpec::of_tasks(vec![task("master", 1), task("worker", 3)])
            },
        );
        job.metadata.namespace = Some("ns".into());
        job.metadata.uid = Some("uid-1".into());
        job
    }

    fn env(pod: &Pod) -> BTreeMap<String, String> {
        pod.spec.as_ref().unwrap().containers[0]
            .env
            .iter()
            .flatten()
            .map(|v| (v.name.clone(), v.value.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn pytorch_gives_every_pod_its_rank_the_world_size_and_the_masters_stable_name() {
        let job = job(&[("pytorch", &["--port=29500"])]);
        let worker = crate::batch::objects::pod(&job, 1, 2, 0);
        let env = env(&worker);
        assert_eq!(env["MASTER_ADDR"], "train-master-0.train");
        assert_eq!(env["MASTER_PORT"], "29500");
        assert_eq!(env["WORLD_SIZE"], "4");
        assert_eq!(env["RANK"], "3");
        let spec = worker.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("train-worker-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("train"));
        assert_eq!(worker.metadata.name.as_deref(), Some("train-worker-2"));
        let master = crate::batch::objects::pod(&job, 0, 0, 0);
        assert_eq!(self::env(&master)["RANK"], "0");
    }

    #[test]
    fn svc_lists_every_tasks_hosts_in_env_and_in_its_config_map() {
        let job = job(&[("svc", &[]), ("env", &[])]);
        let pod = crate::batch::objects::pod(&job, 1, 0, 0);
        let env = env(&pod);
        assert_eq!(
            env["VC_WORKER_HOSTS"],
            "train-worker-0.train,train-worker-1.train,train-worker-2.train"
        );
        assert_eq!(env["VC_MASTER_NUM"], "1");
        assert_eq!(env["VC_TASK_INDEX"], "0");
        let (service, config_map) = objects(&job);
        assert_eq!(
            service.unwrap().spec.unwrap().cluster_ip.as_deref(),
            Some("None")
        );
        let data = config_map.unwrap().data.unwrap();
        assert_eq!(data["worker.num"], "3");
        assert_eq!(data["master.host"], "train-master-0.train");
    }

    #[test]
    fn ssh_mounts_the_secret_named_after_the_job_and_its_uid_so_no_other_secret_collides() {
        let job = job(&[("ssh", &[])]);
        let pod = crate::batch::objects::pod(&job, 1, 0, 0);
        let volume = pod
            .spec
            .as_ref()
            .unwrap()
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .find(|v| v.name == "job-ssh")
            .cloned()
            .unwrap();
        let mounted = volume.secret.unwrap().secret_name.unwrap();
        assert_eq!(mounted, "train-ssh-uid-1");
        let made = crate::batch::ssh::secret(&job, &[1; 32], 7);
        assert_eq!(made.metadata.name.as_deref(), Some(mounted.as_str()));
        // A Job of the same name made again (the first one's Secret not yet collected), or a
        // Secret `train-ssh` of someone else's, is never the one mounted.
        let mut again = job.clone();
        again.metadata.uid = Some("uid-2".into());
        assert_ne!(crate::batch::ssh::secret_name(&again), mounted);
        assert_ne!(mounted, "train-ssh");
    }

    #[test]
    fn tensorflow_describes_the_cluster_and_the_pods_own_task() {
        let job = job(&[("tensorflow", &["--ps=master"])]);
        let pod = crate::batch::objects::pod(&job, 0, 0, 0);
        let config: serde_json::Value = serde_json::from_str(&env(&pod)["TF_CONFIG"]).unwrap();
        assert_eq!(config["task"], json!({"type": "ps", "index": 0}));
        assert_eq!(config["cluster"]["worker"][2], "train-worker-2.train:2222");
    }

    #[test]
    fn the_pods_carry_the_job_task_index_group_and_queue_and_are_owned_by_the_job() {
        let job = job(&[]);
        let pod = crate::batch::objects::pod(&job, 1, 1, 3);
        let labels = pod.metadata.labels.clone().unwrap();
        for (key, value) in [
            (JOB_NAME_LABEL, "train"),
            (crate::batch::names::TASK_NAME_LABEL, "worker"),
            (crate::batch::names::TASK_INDEX_LABEL, "1"),
            (crate::batch::names::JOB_VERSION_LABEL, "3"),
            (crate::api::labels::POD_GROUP_LABEL, "train"),
            (crate::api::labels::QUEUE_LABEL, "q"),
        ] {
            assert_eq!(labels[key], value, "{key}");
        }
        let owner = &pod.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            ("uid-1", Some(true))
        );
        assert!(
            pod.spec.unwrap().hostname.is_none(),
            "no svc plugin, no host name"
        );
    }
}
