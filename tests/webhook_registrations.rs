//! The webhook registrations in `webhooks/` agree with the code and do what their comments
//! say: they parse into the admissionregistration types without losing a field, point only at
//! routes that exist, fail closed, and select exactly the pods and Jobs that use Gangplank
//! (checked by evaluating their selectors against every combination of labels, and running
//! the real mutating rule between entries the way the API server does). `render.sh` fills in
//! the CA bundle and the client config mechanically.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use base64::Engine;
use gangplank::api::{PodGroupPhase, QueueState, kueue, labels};
use gangplank::webhooks::lookup::{PodGroupView, QueueView};
use gangplank::webhooks::{Hook, Settings, StaticLookup, Webhooks, pods};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The YAML documents of `text`, as JSON values.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| serde_json::to_value(serde_yaml::Value::deserialize(doc).unwrap()).unwrap())
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The only document of `webhooks/<file>` as `K`, checked to lose no field in a round trip.
fn registration<K: DeserializeOwned + serde::Serialize>(file: &str) -> K {
    let text = std::fs::read_to_string(repo().join("webhooks").join(file)).unwrap();
    let docs = documents(&text);
    assert_eq!(docs.len(), 1, "{file} holds one registration");
    let typed: K = serde_json::from_value(docs[0].clone())
        .unwrap_or_else(|e| panic!("{file} does not parse: {e}"));
    let mut lost = Vec::new();
    common::lost_fields(
        "",
        &docs[0],
        &serde_json::to_value(&typed).unwrap(),
        &mut lost,
    );
    assert!(lost.is_empty(), "{file}: fields lost or misspelt: {lost:?}");
    typed
}

/// What the tests need of one webhook entry, mutating or validating.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    client: WebhookClientConfig,
    rules: Vec<RuleWithOperations>,
    object_selector: Option<LabelSelector>,
    namespace_selector: Option<LabelSelector>,
    failure_policy: Option<String>,
    side_effects: String,
    timeout: Option<i32>,
    match_policy: Option<String>,
    versions: Vec<String>,
}

impl From<MutatingWebhook> for Entry {
    fn from(w: MutatingWebhook) -> Self {
        Entry {
            name: w.name,
            client: w.client_config,
            rules: w.rules.unwrap_or_default(),
            object_selector: w.object_selector,
            namespace_selector: w.namespace_selector,
            failure_policy: w.failure_policy,
            side_effects: w.side_effects,
            timeout: w.timeout_seconds,
            match_policy: w.match_policy,
            versions: w.admission_review_versions,
        }
    }
}

impl From<ValidatingWebhook> for Entry {
    fn from(w: ValidatingWebhook) -> Self {
        Entry {
            name: w.name,
            client: w.client_config,
            rules: w.rules.unwrap_or_default(),
            object_selector: w.object_selector,
            namespace_selector: w.namespace_selector,
            failure_policy: w.failure_policy,
            side_effects: w.side_effects,
            timeout: w.timeout_seconds,
            match_policy: w.match_policy,
            versions: w.admission_review_versions,
        }
    }
}

impl Entry {
    fn path(&self) -> String {
        self.client
            .service
            .as_ref()
            .and_then(|s| s.path.clone())
            .unwrap_or_default()
    }

    fn covers(&self, resource: &str, operation: &str) -> bool {
        self.rules.iter().any(|r| {
            r.resources.iter().flatten().any(|x| x == resource)
                && r.operations.iter().flatten().any(|o| o == operation)
        })
    }

    /// Whether the entry is called for `operation` on `resource` of API group `group`.
    fn covers_in(&self, group: &str, resource: &str, operation: &str) -> bool {
        self.rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.operations.iter().flatten().any(|o| o == operation)
        })
    }

    /// Whether the API server would call this entry for an object with `labels` in a
    /// namespace with `namespace_labels`.
    fn selects(
        &self,
        labels: &BTreeMap<String, String>,
        namespace_labels: &BTreeMap<String, String>,
    ) -> bool {
        matches(self.object_selector.as_ref(), labels)
            && matches(self.namespace_selector.as_ref(), namespace_labels)
    }
}

/// A label selector as the API server evaluates it (absent and empty select everything).
fn matches(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            other => panic!("unknown selector operator {other}"),
        }
    });
    by_labels && by_expressions
}

fn mutating() -> Vec<Entry> {
    let config: MutatingWebhookConfiguration = registration("mutating.yaml");
    config
        .webhooks
        .unwrap()
        .into_iter()
        .map(Entry::from)
        .collect()
}

fn validating() -> Vec<Entry> {
    let config: ValidatingWebhookConfiguration = registration("validating.yaml");
    config
        .webhooks
        .unwrap()
        .into_iter()
        .map(Entry::from)
        .collect()
}

fn mutating_webhooks() -> Vec<MutatingWebhook> {
    let config: MutatingWebhookConfiguration = registration("mutating.yaml");
    config.webhooks.unwrap()
}

#[test]
fn every_route_is_registered_and_every_registration_names_a_route() {
    let routes: Vec<String> = Hook::ALL.iter().map(|h| h.path()).collect();
    let mut registered: Vec<String> = mutating()
        .iter()
        .chain(validating().iter())
        .map(Entry::path)
        .collect();
    for path in &registered {
        assert!(routes.contains(path), "{path} is not a route of the router");
    }
    registered.sort();
    registered.dedup();
    let mut expected = routes.clone();
    expected.sort();
    assert_eq!(registered, expected);
}

#[test]
fn every_entry_fails_closed_has_no_side_effects_on_dry_runs_speaks_v1_and_answers_within_five_seconds()
 {
    for entry in mutating().into_iter().chain(validating()) {
        let name = &entry.name;
        assert!(name.ends_with(".gangplank.dev"), "{name}");
        assert_eq!(entry.failure_policy.as_deref(), Some("Fail"), "{name}");
        // The pod webhook admits gangs on arrival, which writes the leader's ledger; it skips
        // that on a dry run.
        let pods = entry
            .rules
            .iter()
            .any(|r| r.resources.iter().flatten().any(|x| x == "pods"));
        let side_effects = if pods { "NoneOnDryRun" } else { "None" };
        assert_eq!(entry.side_effects, side_effects, "{name}");
        assert_eq!(entry.versions, ["v1"], "{name}");
        assert_eq!(entry.match_policy.as_deref(), Some("Equivalent"), "{name}");
        assert_eq!(entry.timeout, Some(5), "{name}");
        let service = entry.client.service.as_ref().expect("a service reference");
        assert_eq!(
            (
                service.namespace.as_str(),
                service.name.as_str(),
                service.port
            ),
            ("gangplank-system", "gangplank", Some(9443)),
            "{name}"
        );
        assert!(
            entry
                .rules
                .iter()
                .all(|r| !r.resources.iter().flatten().any(|x| x.contains('/'))),
            "{name} must not select a subresource (status is Gangplank's own)"
        );
    }
    for webhook in mutating_webhooks() {
        assert_eq!(
            webhook.reinvocation_policy.as_deref(),
            Some("IfNeeded"),
            "{}",
            webhook.name
        );
    }
}

#[test]
fn the_routes_each_entry_calls_handle_the_operations_it_sends() {
    for entry in mutating().into_iter().chain(validating()) {
        let hook = Hook::ALL
            .into_iter()
            .find(|h| h.path() == entry.path())
            .unwrap();
        for rule in &entry.rules {
            for operation in rule.operations.iter().flatten() {
                assert!(
                    hook.operations().contains(&operation.as_str()),
                    "{} sends {operation} to {hook}, whose metrics do not expect it",
                    entry.name
                );
            }
        }
    }
}

const GROUP_KEYS: [&str; 4] = [
    labels::POD_GROUP_LABEL,
    labels::SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    labels::QUEUE_LABEL,
    labels::VOLCANO_QUEUE_NAME_LABEL,
];

/// A CREATE review of `pod` in `namespace`.
fn create_request(pod: &Value, namespace: &str) -> AdmissionRequest<Pod> {
    let review: AdmissionReview<Pod> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0", "operation": "CREATE", "namespace": namespace, "name": "",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {}, "object": pod
        }
    }))
    .unwrap();
    review.try_into().unwrap()
}

fn label_map(value: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(value.clone()).unwrap_or_default()
}

/// Every pod variant: each subset of the four selectable keys, with and without Volcano's
/// group annotation, with and without the marks of a Workload Kueue admitted (its PodSet's
/// label, and its annotation naming the Workload `w`, which has a Gangplank PodGroup in
/// `team`), in a namespace with and without a default queue, and in kube-system.
fn pod_variants() -> Vec<(Value, String, BTreeMap<String, String>, bool)> {
    let mut variants = Vec::new();
    for mask in 0..16u8 {
        for (volcano, kueue) in [(false, false), (true, false), (false, true), (true, true)] {
            for (namespace, default_queue) in
                [("team", false), ("team", true), ("kube-system", true)]
            {
                let mut pod_labels = BTreeMap::new();
                for (i, key) in GROUP_KEYS.iter().enumerate() {
                    if mask & (1 << i) != 0 {
                        pod_labels.insert(key.to_string(), "g".to_string());
                    }
                }
                pod_labels.insert("app".into(), "x".into());
                let mut annotations: BTreeMap<String, String> = volcano
                    .then(|| (labels::VOLCANO_GROUP_NAME_ANNOTATION.into(), "g".into()))
                    .into_iter()
                    .collect();
                if kueue {
                    pod_labels.insert("kueue.x-k8s.io/podset".into(), "main".into());
                    annotations.insert(kueue::WORKLOAD_ANNOTATION.into(), "w".into());
                }
                let mut ns_labels = BTreeMap::from([(
                    "kubernetes.io/metadata.name".to_string(),
                    namespace.to_string(),
                )]);
                if default_queue {
                    ns_labels.insert(labels::QUEUE_LABEL.into(), "team-queue".into());
                }
                let system = namespace == "kube-system";
                // Selectors see labels only: a pod known by Volcano's annotation alone reaches
                // Gangplank through its namespace's default queue.
                let managed = !system && (mask != 0 || default_queue || kueue);
                let pod = json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"generateName": "p-", "namespace": namespace,
                        "labels": pod_labels, "annotations": annotations},
                    "spec": {"containers": [{"name": "main", "image": "busybox"}]}
                });
                variants.push((pod, namespace.to_string(), ns_labels, managed));
            }
        }
    }
    variants
}

#[test]
fn every_managed_pod_is_mutated_exactly_once_and_every_other_pod_never() {
    let webhooks = Webhooks::new(
        Arc::new(StaticLookup {
            namespaces: vec![("team".into(), "team-queue".into())],
            queues: ["team-queue", "g"].map(open_queue).to_vec(),
            pod_groups: vec![PodGroupView {
                namespace: "team".into(),
                name: "w".into(),
                queue: "team-queue".into(),
                phase: PodGroupPhase::Inqueue,
            }],
            ..Default::default()
        }),
        Settings::default(),
    );
    let entries: Vec<Entry> = mutating()
        .into_iter()
        .filter(|e| e.covers("pods", "CREATE"))
        .collect();
    assert_eq!(entries.len(), 6);
    for (mut pod, namespace, ns_labels, managed) in pod_variants() {
        let before = pod.clone();
        let mut calls = Vec::new();
        // The API server calls the entries in order, each seeing the pod as the previous
        // ones left it.
        for entry in &entries {
            if !entry.selects(&label_map(&pod["metadata"]["labels"]), &ns_labels) {
                continue;
            }
            calls.push(entry.name.clone());
            let request = create_request(&pod, &namespace);
            let verdict = pods::mutate(&webhooks, &request).expect("admitted");
            let gangplank::webhooks::Verdict::Allow { patch, .. } = verdict else {
                unreachable!()
            };
            json_patch::patch(&mut pod, &patch).unwrap();
        }
        assert_eq!(
            calls.len(),
            usize::from(managed),
            "pod {before} in {ns_labels:?} was sent to {calls:?}"
        );
        if managed {
            let gates = &pod["spec"]["schedulingGates"];
            assert_eq!(gates, &json!([{"name": labels::ADMISSION_GATE}]), "{pod}");
            let resources = &pod["spec"]["containers"][0]["resources"];
            assert_eq!(resources["requests"][labels::MANAGED_RESOURCE], "0");
            assert_eq!(resources["limits"][labels::MANAGED_RESOURCE], "0");
            assert_eq!(resources["requests"][labels::PLACEMENT_RESOURCE], "0");
            assert_eq!(resources["limits"][labels::PLACEMENT_RESOURCE], "0");
        }
    }
}

#[test]
fn pods_are_checked_in_their_one_mutating_call_and_never_sent_to_a_validating_webhook() {
    for entry in validating() {
        assert!(!entry.covers("pods", "CREATE"), "{}", entry.name);
    }
}

fn open_queue(name: &str) -> QueueView {
    QueueView {
        name: name.into(),
        state: QueueState::Open,
        parent: None,
        namespaces: None,
    }
}

#[test]
fn only_jobs_that_name_a_queue_reach_the_job_webhooks() {
    let namespace = BTreeMap::from([(
        "kubernetes.io/metadata.name".to_string(),
        "team".to_string(),
    )]);
    for entry in mutating().into_iter().chain(validating()) {
        if !entry.covers_in("batch", "jobs", "CREATE") {
            continue;
        }
        let with_queue = BTreeMap::from([(labels::QUEUE_LABEL.to_string(), "q".to_string())]);
        assert!(entry.selects(&with_queue, &namespace), "{}", entry.name);
        let plain = BTreeMap::from([("app".to_string(), "x".to_string())]);
        assert!(!entry.selects(&plain, &namespace), "{}", entry.name);
    }
}

#[test]
fn every_workload_kind_gangplank_groups_by_that_names_a_queue_reaches_the_workload_webhook() {
    let namespace = BTreeMap::from([(
        "kubernetes.io/metadata.name".to_string(),
        "team".to_string(),
    )]);
    let entries: Vec<Entry> = mutating()
        .into_iter()
        .filter(|e| {
            e.client.service.as_ref().and_then(|s| s.path.as_deref())
                == Some(&Hook::MutateWorkloads.path())
        })
        .collect();
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    for kind in gangplank::api::workloads::KINDS {
        let covered = entry.rules.iter().any(|rule| {
            let has = |list: &Option<Vec<String>>, value: &str| {
                list.iter().flatten().any(|v| v == value || v == "*")
            };
            has(&rule.api_groups, kind.group)
                && has(&rule.resources, kind.plural)
                && has(&rule.operations, "CREATE")
        });
        assert!(
            covered,
            "{} ({}) is not sent to the workload webhook",
            kind.kind, kind.group
        );
    }
    let with_queue = BTreeMap::from([(labels::QUEUE_LABEL.to_string(), "q".to_string())]);
    assert!(entry.selects(&with_queue, &namespace));
    let plain = BTreeMap::from([("app".to_string(), "x".to_string())]);
    assert!(!entry.selects(&plain, &namespace));
}

#[test]
fn gangplanks_own_namespace_and_kube_system_are_never_selected_for_pods_or_jobs() {
    for entry in mutating().into_iter().chain(validating()) {
        if !(entry.covers("pods", "CREATE") || entry.covers_in("batch", "jobs", "CREATE")) {
            continue;
        }
        for system in ["kube-system", "gangplank-system"] {
            let ns = BTreeMap::from([
                (
                    "kubernetes.io/metadata.name".to_string(),
                    system.to_string(),
                ),
                (labels::QUEUE_LABEL.to_string(), "q".to_string()),
            ]);
            let labelled: BTreeMap<String, String> = GROUP_KEYS
                .iter()
                .map(|k| (k.to_string(), "g".to_string()))
                .collect();
            assert!(
                !entry.selects(&labelled, &ns),
                "{} selects {system}",
                entry.name
            );
        }
    }
}

#[test]
fn gangplanks_own_resources_are_all_sent_without_selectors() {
    for (group, resource, operations) in [
        (labels::GROUP, "podgroups", &["CREATE", "UPDATE"][..]),
        (labels::GROUP, "queues", &["CREATE", "UPDATE", "DELETE"][..]),
        (
            gangplank::api::batch_job::GROUP,
            "jobs",
            &["CREATE", "UPDATE"][..],
        ),
    ] {
        for operation in operations {
            let entries: Vec<Entry> = validating()
                .into_iter()
                .filter(|e| e.covers_in(group, resource, operation))
                .collect();
            assert_eq!(entries.len(), 1, "{resource} {operation}");
            assert!(entries[0].object_selector.is_none());
            assert!(entries[0].namespace_selector.is_none());
        }
    }
}

fn ca_file() -> PathBuf {
    repo().join("tests/tls/a.crt")
}

fn render(args: &[&str]) -> std::process::Output {
    Command::new(repo().join("webhooks/render.sh"))
        .args(args)
        .output()
        .expect("failed to run webhooks/render.sh")
}

/// The client configs of every webhook in rendered output.
fn client_configs(stdout: &[u8]) -> Vec<WebhookClientConfig> {
    let text = String::from_utf8(stdout.to_vec()).unwrap();
    let docs = documents(&text);
    assert_eq!(docs.len(), 2, "a mutating and a validating configuration");
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration"
        ]
    );
    docs.iter()
        .flat_map(|d| d["webhooks"].as_array().unwrap().clone())
        .map(|w| serde_json::from_value(w["clientConfig"].clone()).unwrap())
        .collect()
}

#[test]
fn render_with_a_url_points_every_webhook_at_that_address_with_the_ca() {
    let out = render(&[
        "--url",
        "https://127.0.0.1:9443/",
        "--ca-file",
        ca_file().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pem = std::fs::read(ca_file()).unwrap();
    let expected: Vec<String> = mutating()
        .iter()
        .chain(validating().iter())
        .map(|e| format!("https://127.0.0.1:9443{}", e.path()))
        .collect();
    let configs = client_configs(&out.stdout);
    let urls: Vec<String> = configs.iter().map(|c| c.url.clone().unwrap()).collect();
    assert_eq!(urls, expected);
    for config in configs {
        assert!(config.service.is_none());
        assert_eq!(config.ca_bundle.unwrap().0, pem);
    }
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains("# substituted by webhooks/render.sh"),
        "a marked line was left as it was"
    );
}

#[test]
fn render_with_the_service_keeps_the_service_and_fills_the_ca() {
    let out = render(&["--service", "--ca-file", ca_file().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pem = std::fs::read(ca_file()).unwrap();
    let configs = client_configs(&out.stdout);
    assert_eq!(configs.len(), mutating().len() + validating().len());
    for config in configs {
        assert!(config.url.is_none());
        assert_eq!(config.service.unwrap().name, "gangplank");
        assert_eq!(
            base64::engine::general_purpose::STANDARD.encode(config.ca_bundle.unwrap().0),
            base64::engine::general_purpose::STANDARD.encode(&pem)
        );
    }
}

#[test]
fn render_refuses_a_url_with_a_path_a_missing_ca_and_a_key_file() {
    let ca = ca_file();
    let key = repo().join("tests/tls/a.key");
    for (args, says) in [
        (
            vec!["--url", "https://h:1/x", "--ca-file", ca.to_str().unwrap()],
            "--url must be https://HOST:PORT",
        ),
        (vec!["--service"], "give --ca-file"),
        (
            vec!["--service", "--ca-file", key.to_str().unwrap()],
            "is not a PEM certificate",
        ),
        (
            vec!["--ca-file", ca.to_str().unwrap()],
            "give --service or --url",
        ),
    ] {
        let out = render(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}
