//! The operator manifests in `manifests/` parse into their Kubernetes types without losing a
//! field (a misspelt key would be dropped silently by the API server's older clients and by
//! us), and agree with the code: the Deployment's flags parse with the real command line, the
//! default queue is the spec Gangplank creates at start-up, and RBAC grants what the code does.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use clap::Parser;
use gangplank::api::{Queue, QueueSpec, labels};
use gangplank::config::{Cli, Command};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const NAMESPACE: &str = "gangplank-system";

/// The YAML documents of `manifests/<file>`, as JSON values.
fn documents(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("manifests")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {file}: {e}"));
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| {
            let yaml = serde_yaml::Value::deserialize(doc).unwrap();
            serde_json::to_value(yaml).unwrap()
        })
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The document of `kind` named `name`, as `K`, checked to survive a round trip unchanged.
fn object<K: DeserializeOwned + serde::Serialize>(file: &str, kind: &str, name: &str) -> K {
    let doc = documents(file)
        .into_iter()
        .find(|doc| doc["kind"] == kind && doc["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{file} has no {kind} {name}"));
    let typed: K = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{file}: {kind} {name} does not parse: {e}"));
    let round_trip = serde_json::to_value(&typed).unwrap();
    let mut lost = Vec::new();
    common::lost_fields("", &doc, &round_trip, &mut lost);
    assert!(
        lost.is_empty(),
        "{file}: {kind} {name} has fields its type does not know (misspelt or misplaced): {lost:?}"
    );
    typed
}

fn kinds(file: &str) -> Vec<String> {
    documents(file)
        .iter()
        .map(|doc| doc["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn serve_args(spec: &PodSpec, container: &str) -> gangplank::config::ServeArgs {
    let container = spec
        .containers
        .iter()
        .find(|c| c.name == container)
        .unwrap();
    let args = container.args.clone().unwrap_or_default();
    let cli = Cli::try_parse_from(std::iter::once("gangplank".to_string()).chain(args))
        .unwrap_or_else(|e| panic!("the manifest's flags do not parse: {e}"));
    match cli.command {
        Command::Serve(args) => *args,
        other => panic!("expected serve, got {other:?}"),
    }
}

#[test]
fn namespace_is_gangplank_system() {
    assert_eq!(kinds("namespace.yaml"), ["Namespace"]);
    let _: Namespace = object("namespace.yaml", "Namespace", NAMESPACE);
}

#[test]
fn gangplanks_requests_share_the_schedulers_priority_level_and_its_lease_the_leader_elections() {
    assert_eq!(kinds("flowschema.yaml"), ["FlowSchema", "FlowSchema"]);
    let leases: FlowSchema = object("flowschema.yaml", "FlowSchema", "gangplank-leader-election");
    let spec = leases.spec;
    assert_eq!(spec.priority_level_configuration.name, "leader-election");
    let rule = &spec.rules.unwrap()[0];
    let resources = &rule.resource_rules.as_ref().unwrap()[0];
    assert_eq!(resources.resources, ["leases"]);
    let account = rule.subjects[0].service_account.as_ref().unwrap();
    assert_eq!(
        (account.namespace.as_str(), account.name.as_str()),
        (NAMESPACE, "gangplank")
    );
    assert!(
        spec.matching_precedence < Some(800),
        "matched before the schema for the rest"
    );

    let schema: FlowSchema = object("flowschema.yaml", "FlowSchema", "gangplank");
    let spec = schema.spec;
    assert_eq!(spec.priority_level_configuration.name, "workload-high");
    let subjects = &spec.rules.unwrap()[0].subjects;
    let account = subjects[0].service_account.as_ref().unwrap();
    assert_eq!(
        (account.namespace.as_str(), account.name.as_str()),
        (NAMESPACE, "gangplank")
    );
}

#[test]
fn the_network_policy_selects_gangplanks_pods_and_names_each_port_they_serve() {
    let deployment: Deployment = object("deployment.yaml", "Deployment", "gangplank");
    let template = deployment.spec.template;
    let policy: NetworkPolicy = object("network-policy.yaml", "NetworkPolicy", "gangplank");
    assert_eq!(policy.metadata.namespace.as_deref(), Some(NAMESPACE));
    let spec = policy.spec.unwrap();
    let pod_labels = template.metadata.unwrap().labels.unwrap();
    for (key, value) in spec.pod_selector.unwrap().match_labels.unwrap() {
        assert_eq!(
            pod_labels.get(&key),
            Some(&value),
            "the policy selects {key}={value}"
        );
    }
    assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
    let ports: BTreeSet<i32> = template.spec.unwrap().containers[0]
        .ports
        .iter()
        .flatten()
        .map(|p| p.container_port)
        .collect();
    let allowed: BTreeSet<i32> = spec
        .ingress
        .iter()
        .flatten()
        .flat_map(|rule| rule.ports.iter().flatten())
        .map(|p| match p.port {
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(port)) => port,
            ref other => panic!("a port by number, not {other:?}"),
        })
        .collect();
    assert_eq!(allowed, ports, "every port the pod serves, no other");
    let metrics = spec.ingress.unwrap().pop().unwrap();
    assert!(
        !metrics.from.unwrap_or_default().is_empty(),
        "the metrics port is open to the monitoring namespace only, by default"
    );
}

#[test]
fn default_queue_manifest_is_the_queue_created_at_start_up() {
    assert_eq!(kinds("default-queue.yaml"), ["Queue"]);
    let queue: Queue = object("default-queue.yaml", "Queue", labels::DEFAULT_QUEUE);
    assert_eq!(queue.spec, QueueSpec::default());
}

#[test]
fn deployment_serves_tls_from_the_mounted_secret_and_probes_the_metrics_port() {
    assert_eq!(
        kinds("deployment.yaml"),
        [
            "PriorityClass",
            "PodDisruptionBudget",
            "Service",
            "Service",
            "Deployment"
        ]
    );
    let _: PriorityClass = object("deployment.yaml", "PriorityClass", "gangplank-critical");
    let deployment: Deployment = object("deployment.yaml", "Deployment", "gangplank");
    assert_eq!(deployment.metadata.namespace.as_deref(), Some(NAMESPACE));
    let pod = deployment.spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("gangplank"));

    let args = serve_args(&pod, "gangplank");
    assert_eq!(args.extender_addr.port(), 8443);
    assert_eq!(args.webhook_addr.port(), 9443);
    assert_eq!(args.metrics_addr.port(), 8080);
    args.check()
        .expect("the extender on the pod network demands the scheduler's client certificate");
    let files = args.extender_tls().expect("TLS is configured");
    let client_ca = files.client_ca.expect("a client CA is configured");
    let mount = &pod.containers[0].volume_mounts.as_ref().unwrap()[0];
    for file in [&files.cert, &files.key, &client_ca] {
        assert!(file.starts_with(&mount.mount_path), "{}", file.display());
    }
    let volume = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == mount.name)
        .unwrap();
    assert_eq!(
        volume.secret.as_ref().unwrap().secret_name.as_deref(),
        Some("gangplank-tls")
    );

    let container = &pod.containers[0];
    let probe_path = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        let get = probe.as_ref().unwrap().http_get.as_ref().unwrap();
        (get.path.clone().unwrap(), get.port.clone())
    };
    let metrics =
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into());
    assert_eq!(
        probe_path(&container.liveness_probe),
        ("/livez".to_string(), metrics.clone())
    );
    assert_eq!(
        probe_path(&container.readiness_probe),
        ("/readyz".to_string(), metrics)
    );
}

/// The named Service's port names and numbers, and its selector.
fn service(name: &str) -> (Vec<(String, i32)>, BTreeMap<String, String>) {
    let all: Vec<Service> = documents("deployment.yaml")
        .into_iter()
        .filter(|d| d["kind"] == "Service")
        .map(|d| serde_json::from_value(d).unwrap())
        .collect();
    let service = all
        .into_iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no Service {name}"));
    assert_eq!(service.metadata.namespace.as_deref(), Some(NAMESPACE));
    let spec = service.spec.unwrap();
    let ports = spec
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.name.unwrap(), p.port))
        .collect();
    (ports, spec.selector.unwrap())
}

#[test]
fn every_replica_serves_the_webhooks_and_only_the_leader_the_extender() {
    let (ports, selector) = service("gangplank");
    assert_eq!(
        ports,
        [
            ("webhooks".to_string(), 9443),
            ("metrics".to_string(), 8080)
        ]
    );
    assert_eq!(
        selector,
        BTreeMap::from([(
            "app.kubernetes.io/name".to_string(),
            "gangplank".to_string()
        )])
    );
    let (ports, selector) = service("gangplank-extender");
    assert_eq!(ports, [("extender".to_string(), 8443)]);
    assert_eq!(
        selector.get(labels::LEADER_LABEL).map(String::as_str),
        Some("true")
    );

    let deployment: Deployment = object("deployment.yaml", "Deployment", "gangplank");
    let spec = deployment.spec;
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    let args = serve_args(&pod, "gangplank");
    assert!(args.leader_elect);
    let env: Vec<(String, String)> = pod.containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| {
            let field = e.value_from.as_ref().unwrap().field_ref.as_ref().unwrap();
            (e.name.clone(), field.field_path.clone())
        })
        .collect();
    assert_eq!(
        env,
        [
            (
                "POD_NAMESPACE".to_string(),
                "metadata.namespace".to_string()
            ),
            ("POD_NAME".to_string(), "metadata.name".to_string())
        ]
    );
}

#[test]
fn sidecar_example_flags_parse_and_listen_on_loopback() {
    let pod: Pod = object("examples/scheduler-sidecar.yaml", "Pod", "kube-scheduler");
    let args = serve_args(pod.spec.as_ref().unwrap(), "gangplank");
    assert!(args.extender_addr.ip().is_loopback());
    args.check().unwrap();
    assert!(args.extender_tls().is_some());
}

#[test]
fn cluster_role_grants_exactly_what_gangplank_calls() {
    assert_eq!(
        kinds("rbac.yaml"),
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding"
        ]
    );
    let _: ServiceAccount = object("rbac.yaml", "ServiceAccount", "gangplank");
    let role: ClusterRole = object("rbac.yaml", "ClusterRole", "gangplank");
    // Every API call in src/, by (group, resource, verb): the watches of the cache and the
    // stores, the gate-release patch, Bindings, Evictions, PodGroup and default-Queue creation,
    // the admitted-ahead annotation, status applies (Volcano's by merge patch), Events, and the
    // batch Job controller's pods, plugin objects, Job statuses and TTL deletions. The end-to-end suite runs Gangplank as this ServiceAccount,
    // which shows the list is enough.
    let calls: BTreeSet<(&str, &str, &str)> = [
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods", "patch"),
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
        ("resource.k8s.io", "deviceclasses", "list"),
        ("resource.k8s.io", "deviceclasses", "watch"),
        ("resource.k8s.io", "resourceslices", "list"),
        ("resource.k8s.io", "resourceslices", "watch"),
        ("resource.k8s.io", "resourceclaimtemplates", "list"),
        ("resource.k8s.io", "resourceclaimtemplates", "watch"),
        ("resource.k8s.io", "resourceclaims", "list"),
        ("resource.k8s.io", "resourceclaims", "watch"),
        ("", "pods/binding", "create"),
        ("", "pods/eviction", "create"),
        ("batch", "jobs", "list"),
        ("batch", "jobs", "watch"),
        (labels::GROUP, "podgroups", "list"),
        (labels::GROUP, "podgroups", "watch"),
        (labels::GROUP, "podgroups", "create"),
        (labels::GROUP, "podgroups", "patch"),
        (labels::GROUP, "podgroups", "delete"),
        (labels::GROUP, "podgroups/status", "patch"),
        (labels::GROUP, "queues", "get"),
        (labels::GROUP, "queues", "list"),
        (labels::GROUP, "queues", "watch"),
        (labels::GROUP, "queues", "create"),
        (labels::GROUP, "queues/status", "patch"),
        (labels::GROUP, "topologies", "list"),
        (labels::GROUP, "topologies", "watch"),
        ("scheduling.x-k8s.io", "podgroups", "list"),
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.volcano.sh", "podgroups", "list"),
        ("scheduling.volcano.sh", "podgroups", "watch"),
        ("scheduling.volcano.sh", "podgroups", "patch"),
        ("scheduling.volcano.sh", "podgroups/status", "patch"),
        ("scheduling.k8s.io", "podgroups", "list"),
        ("scheduling.k8s.io", "podgroups", "watch"),
        ("scheduling.k8s.io", "compositepodgroups", "list"),
        ("scheduling.k8s.io", "compositepodgroups", "watch"),
        ("kueue.x-k8s.io", "workloads", "list"),
        ("kueue.x-k8s.io", "workloads", "watch"),
        ("kueue.x-k8s.io", "admissionchecks", "list"),
        ("kueue.x-k8s.io", "admissionchecks", "watch"),
        ("kueue.x-k8s.io", "workloads/status", "patch"),
        ("kueue.x-k8s.io", "admissionchecks/status", "patch"),
        ("kueue.x-k8s.io", "workloads", "get"),
        ("kueue.x-k8s.io", "multikueueconfigs", "list"),
        ("kueue.x-k8s.io", "multikueueclusters", "list"),
        ("events.k8s.io", "events", "create"),
        ("batch.gangplank.dev", "jobs", "list"),
        ("batch.gangplank.dev", "jobs", "watch"),
        ("batch.gangplank.dev", "jobs", "delete"),
        ("batch.gangplank.dev", "jobs/status", "patch"),
        ("", "pods", "create"),
        ("", "pods", "delete"),
        ("", "services", "create"),
        ("", "configmaps", "create"),
        ("", "secrets", "create"),
    ]
    .into();
    let mut granted = BTreeSet::new();
    for rule in role.rules.unwrap() {
        assert_eq!(rule.resource_names, None, "{rule:?}");
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    granted.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    // Workloads, and the LeaderWorkerSets whose replicas' PodGroups the controller makes, are
    // read with one GET each.
    let lws = gangplank::api::leader_worker_set::API_VERSION
        .split_once('/')
        .unwrap()
        .0;
    let workloads = gangplank::api::workloads::KINDS
        .iter()
        .map(|k| (k.group, k.plural, "get"))
        .chain([(lws, gangplank::api::leader_worker_set::PLURAL, "get")]);
    let calls: BTreeSet<(String, String, String)> = calls
        .into_iter()
        .chain(workloads)
        .map(|(g, r, v)| (g.to_owned(), r.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(granted, calls);

    let binding: ClusterRoleBinding = object("rbac.yaml", "ClusterRoleBinding", "gangplank");
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        ("gangplank", Some(NAMESPACE))
    );
}

#[test]
fn a_sidecar_may_read_the_schedulers_lease_and_nothing_else_in_kube_system() {
    let role: Role = object("rbac.yaml", "Role", "gangplank-scheduler-lease");
    assert_eq!(role.metadata.namespace.as_deref(), Some("kube-system"));
    let rules = role.rules.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["leases".to_string()][..])
    );
    assert_eq!(
        rules[0].resource_names.as_deref(),
        Some(&["kube-scheduler".to_string()][..])
    );
    assert_eq!(rules[0].verbs, ["get"]);
    let binding: RoleBinding = object("rbac.yaml", "RoleBinding", "gangplank-scheduler-lease");
    assert_eq!(binding.role_ref.name, "gangplank-scheduler-lease");
}

#[test]
fn the_leader_election_role_grants_exactly_the_lease_calls_in_gangplanks_namespace() {
    let role: Role = object("rbac.yaml", "Role", "gangplank-leader-election");
    assert_eq!(role.metadata.namespace.as_deref(), Some(NAMESPACE));
    let rules = role.rules.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].api_groups.as_deref(),
        Some(&["coordination.k8s.io".to_string()][..])
    );
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["leases".to_string()][..])
    );
    assert_eq!(rules[0].verbs, ["get", "create", "update"]);
    let binding: RoleBinding = object("rbac.yaml", "RoleBinding", "gangplank-leader-election");
    assert_eq!(binding.role_ref.name, "gangplank-leader-election");
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        ("gangplank", Some(NAMESPACE))
    );
}

/// The resource (group, plural) of a kind the code names.
fn resource_of<K: kube::Resource<DynamicType = ()>>() -> (String, String) {
    (K::group(&()).into_owned(), K::plural(&()).into_owned())
}

/// The names the serving code gives the kinds it opens an `Api` for, and their resources.
fn kinds_the_code_names() -> BTreeMap<&'static str, (String, String)> {
    use gangplank::api::composite_pod_group::CompositePodGroup;
    use gangplank::api::scheduler_plugins::SchedulerPluginsPodGroup;
    use gangplank::api::volcano::VolcanoPodGroup;
    use gangplank::api::workload_api::{UpstreamPodGroup, UpstreamPodGroupV1alpha2};
    use k8s_openapi::api::{batch, coordination, core, events, resource};
    [
        ("Pod", resource_of::<core::v1::Pod>()),
        ("Node", resource_of::<core::v1::Node>()),
        ("Namespace", resource_of::<core::v1::Namespace>()),
        ("Service", resource_of::<core::v1::Service>()),
        ("Secret", resource_of::<core::v1::Secret>()),
        ("ConfigMap", resource_of::<core::v1::ConfigMap>()),
        ("Event", resource_of::<core::v1::Event>()),
        ("K8sEvent", resource_of::<events::v1::Event>()),
        ("Lease", resource_of::<coordination::v1::Lease>()),
        ("Job", resource_of::<batch::v1::Job>()),
        ("DeviceClass", resource_of::<resource::v1::DeviceClass>()),
        (
            "ResourceSlice",
            resource_of::<resource::v1::ResourceSlice>(),
        ),
        (
            "ResourceClaimTemplate",
            resource_of::<resource::v1::ResourceClaimTemplate>(),
        ),
        (
            "ResourceClaim",
            resource_of::<resource::v1::ResourceClaim>(),
        ),
        ("PodGroup", resource_of::<gangplank::api::PodGroup>()),
        (
            "KueueWorkload",
            resource_of::<gangplank::api::kueue::KueueWorkload>(),
        ),
        (
            "KueueAdmissionCheck",
            resource_of::<gangplank::api::kueue::KueueAdmissionCheck>(),
        ),
        (
            "MultiKueueConfig",
            resource_of::<gangplank::api::multikueue::MultiKueueConfig>(),
        ),
        (
            "MultiKueueCluster",
            resource_of::<gangplank::api::multikueue::MultiKueueCluster>(),
        ),
        ("Queue", resource_of::<Queue>()),
        ("Topology", resource_of::<gangplank::api::Topology>()),
        (
            "BatchJob",
            resource_of::<gangplank::api::batch_job::BatchJob>(),
        ),
        (
            "SchedulerPluginsPodGroup",
            resource_of::<SchedulerPluginsPodGroup>(),
        ),
        ("VolcanoPodGroup", resource_of::<VolcanoPodGroup>()),
        ("UpstreamPodGroup", resource_of::<UpstreamPodGroup>()),
        (
            "UpstreamPodGroupV1alpha2",
            resource_of::<UpstreamPodGroupV1alpha2>(),
        ),
        ("CompositePodGroup", resource_of::<CompositePodGroup>()),
    ]
    .into()
}

/// The `.rs` files under `dir`.
fn rust_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The kind names `T` of every `Api<T>` and `Api::<T>` in `text` (the inner type of
/// `PartialObjectMeta<T>`, the last segment of a path; generic parameters and `DynamicObject`
/// left out).
fn api_kinds(text: &str) -> Vec<String> {
    let mut kinds = Vec::new();
    for (at, found) in text.match_indices("Api") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + found.len()..];
        let Some(rest) = rest.strip_prefix("::<").or_else(|| rest.strip_prefix('<')) else {
            continue;
        };
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find_map(|(i, c)| {
                depth += match c {
                    '<' => 1,
                    '>' => -1,
                    _ => 0,
                };
                (depth == 0).then_some(i)
            })
            .expect("a closed Api<…>");
        let ty = &rest[..end];
        let ty = ty
            .split_once('<')
            .map_or(ty, |(_, inner)| inner.trim_end_matches('>'));
        let name = ty.rsplit("::").next().unwrap_or(ty).trim();
        let generic = name.len() == 1;
        if !generic && name != "DynamicObject" {
            kinds.push(name.to_owned());
        }
    }
    kinds
}

#[test]
fn rbac_grants_the_kinds_the_serving_code_opens_an_api_for_and_no_other() {
    // The serving code: src/ but the CLI (run with its user's credentials) and the test
    // modules at the bottom of files.
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let names = kinds_the_code_names();
    let mut opened = BTreeSet::new();
    for file in rust_files(&src) {
        if file.starts_with(src.join("cli")) || file.ends_with("testing.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let serving = text.split("\n#[cfg(test)]\nmod ").next().unwrap();
        for kind in api_kinds(serving) {
            let resource = names.get(kind.as_str()).unwrap_or_else(|| {
                panic!(
                    "{} opens an Api for {kind}, which this test does not know: add it to \
                     kinds_the_code_names, and grant its calls in manifests/rbac.yaml",
                    file.display()
                )
            });
            opened.insert(resource.clone());
        }
    }
    // Workloads are read through dynamic Apis of the kinds the code lists, and so are
    // LeaderWorkerSets.
    opened.extend(
        gangplank::api::workloads::KINDS
            .iter()
            .map(|k| (k.group.to_owned(), k.plural.to_owned())),
    );
    let lws = gangplank::api::leader_worker_set::API_VERSION.split_once('/');
    opened.insert((
        lws.unwrap().0.to_owned(),
        gangplank::api::leader_worker_set::PLURAL.to_owned(),
    ));

    let mut rules: Vec<_> = object::<ClusterRole>("rbac.yaml", "ClusterRole", "gangplank")
        .rules
        .unwrap();
    for role in [
        "gangplank-stand-ins",
        "gangplank-leader-election",
        "gangplank-scheduler-lease",
    ] {
        rules.extend(object::<Role>("rbac.yaml", "Role", role).rules.unwrap());
    }
    let mut granted = BTreeSet::new();
    for rule in rules {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                let kind = resource.split('/').next().unwrap();
                granted.insert((group.clone(), kind.to_owned()));
            }
        }
    }
    let unused: Vec<_> = granted.difference(&opened).collect();
    let ungranted: Vec<_> = opened.difference(&granted).collect();
    assert!(
        unused.is_empty() && ungranted.is_empty(),
        "manifests/rbac.yaml grants calls on {unused:?}, for which the serving code opens no Api, \
         and none on {ungranted:?}, for which it does"
    );
}

#[test]
fn the_api_scan_reads_the_kind_of_each_api() {
    let code = "let a: Api<Pod> = x; Api::<core::Node>::all(c); Api::<PartialObjectMeta<Namespace>>::all(c);\n\
        fn f<K>(api: Api<K>) {} let d: Api<DynamicObject>; ApiResource::from_gvk(g); MyApi<Queue>";
    assert_eq!(api_kinds(code), ["Pod", "Node", "Namespace"]);
}

#[test]
fn the_charts_app_version_is_the_crates_version() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/gangplank/Chart.yaml");
    let chart: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        chart["appVersion"].as_str(),
        Some(env!("CARGO_PKG_VERSION")),
        "charts/gangplank/Chart.yaml's appVersion must be Cargo.toml's version"
    );
    assert_eq!(gangplank::build::VERSION, env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_charts_kueue_admission_check_names_gangplanks_controller() {
    let template = std::fs::read_to_string("charts/gangplank/templates/kueue-admission-check.yaml")
        .expect("the chart's AdmissionCheck template");
    assert!(
        template.contains(&format!(
            "controllerName: {}",
            gangplank::api::kueue::CONTROLLER_NAME
        )),
        "{template}"
    );
}
