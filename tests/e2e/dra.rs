//! GPUs claimed through Dynamic Resource Allocation: the harness publishes ResourceSlices of
//! a made-up driver for two of the kwok nodes (8 devices each) and a DeviceClass selecting
//! them; the stock scheduler allocates the claims itself (structured parameters need no
//! driver on the node), and Gangplank counts the devices per class
//! (`deviceclass.resource.kubernetes.io/<class>`) in fit, queue usage and capability. Each
//! test makes its own class, driver and slices, and deletes them.

use gangplank::api::{PodGroup, Queue, QueueSpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::cli::gangplank;
use crate::queues::{QueueGuard, create_queue, delete_queue, not_admitted};
use crate::support::{
    Cluster, TestNamespace, eventually, holds_for, managed_pod, pod_group, unique,
};

/// Devices per node with a slice.
const PER_NODE: usize = 8;

/// A DeviceClass of its own driver, and that driver's slices on two nodes; deleted by
/// [`Gpus::remove`] (or with kubectl when the test panics).
struct Gpus {
    class: String,
    nodes: Vec<String>,
    slices: Vec<String>,
    client: kube::Client,
}

impl Gpus {
    async fn publish(cluster: &Cluster) -> Gpus {
        Gpus::publish_selecting(cluster, |driver| format!("device.driver == {driver:?}")).await
    }

    /// [`Gpus::publish`] with the class's selector made by `selector` from the driver's name.
    async fn publish_selecting(cluster: &Cluster, selector: impl Fn(&str) -> String) -> Gpus {
        let class = unique("gpu");
        let driver = format!("{class}.example.com");
        let mut nodes: Vec<String> = Api::<Node>::all(cluster.client.clone())
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        nodes.sort();
        nodes.truncate(2);
        let device_class: DeviceClass = serde_json::from_value(json!({
            "metadata": {"name": class},
            "spec": {"selectors": [{"cel": {"expression": selector(&driver)}}]}
        }))
        .unwrap();
        Api::<DeviceClass>::all(cluster.client.clone())
            .create(&PostParams::default(), &device_class)
            .await
            .unwrap();
        let slices = Api::<ResourceSlice>::all(cluster.client.clone());
        let mut names = Vec::new();
        for node in &nodes {
            let name = format!("{class}-{node}");
            let devices: Vec<_> = (0..PER_NODE)
                .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "a100"}}}))
                .collect();
            let slice: ResourceSlice = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {
                    "driver": driver, "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices
                }
            }))
            .unwrap();
            slices.create(&PostParams::default(), &slice).await.unwrap();
            names.push(name);
        }
        Gpus {
            class,
            nodes,
            slices: names,
            client: cluster.client.clone(),
        }
    }

    /// The resource Gangplank counts the class's devices as.
    fn resource(&self) -> String {
        format!("deviceclass.resource.kubernetes.io/{}", self.class)
    }

    /// A ResourceClaimTemplate in `ns` asking for `count` devices of the class.
    async fn template(&self, ns: &TestNamespace, name: &str, count: i64) {
        let template: ResourceClaimTemplate = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": self.class, "count": count}}
            ]}}}
        }))
        .unwrap();
        ns.api::<ResourceClaimTemplate>()
            .create(&PostParams::default(), &template)
            .await
            .unwrap();
    }

    async fn remove(self) {
        let slices = Api::<ResourceSlice>::all(self.client.clone());
        for name in &self.slices {
            slices.delete(name, &DeleteParams::default()).await.unwrap();
        }
        Api::<DeviceClass>::all(self.client.clone())
            .delete(&self.class, &DeleteParams::default())
            .await
            .unwrap();
        std::mem::forget(self);
    }
}

impl Drop for Gpus {
    fn drop(&mut self) {
        let run = crate::support::run_dir();
        let kubectl = |args: &[&str]| {
            let _ = std::process::Command::new(run.join("bin/kubectl"))
                .arg("--kubeconfig")
                .arg(run.join("kubeconfig"))
                .args(args)
                .status();
        };
        for name in &self.slices {
            kubectl(&["delete", "resourceslice", name, "--ignore-not-found"]);
        }
        kubectl(&["delete", "deviceclass", &self.class, "--ignore-not-found"]);
    }
}

/// A gang `name` of `size` members of 1 CPU in `queue`, each claiming devices through the
/// template `template`.
async fn claiming_gang(ns: &TestNamespace, queue: &str, name: &str, size: usize, template: &str) {
    let mut group = pod_group(name, size as i32, None);
    group.spec.queue = Some(queue.to_owned());
    ns.api::<PodGroup>()
        .create(&PostParams::default(), &group)
        .await
        .unwrap();
    for i in 0..size {
        let mut member = managed_pod(&format!("{name}-{i}"), Some(name), 1, json!({}));
        let spec = member.spec.as_mut().unwrap();
        spec.resource_claims = Some(vec![
            serde_json::from_value(json!({"name": "gpus", "resourceClaimTemplateName": template}))
                .unwrap(),
        ]);
        spec.containers[0].resources.as_mut().unwrap().claims = Some(vec![
            serde_json::from_value(json!({"name": "gpus"})).unwrap(),
        ]);
        ns.api::<Pod>()
            .create(&PostParams::default(), &member)
            .await
            .unwrap_or_else(|e| panic!("failed to create pod {name}-{i}: {e}"));
    }
}

/// The nodes of `ns`'s running pods whose name starts with `prefix`.
async fn running_on(pods: &Api<Pod>, prefix: &str) -> Vec<String> {
    let list = pods.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix))
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.spec?.node_name)
        .collect()
}

/// What `queue`'s status says it holds of `resource`.
async fn allocated(client: &kube::Client, queue: &str, resource: &str) -> Option<String> {
    let queue = Api::<Queue>::all(client.clone()).get(queue).await.ok()?;
    Some(queue.status?.allocated.get(resource)?.0.clone())
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_claiming_gpus_through_a_template_runs_whole_on_the_nodes_with_devices_and_counts_in_its_queue()
 {
    let cluster = Cluster::connect().await;
    let gpus = Gpus::publish(&cluster).await;
    let queue = create_queue(&cluster.client, "dra", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("dra-whole").await;
    gpus.template(&ns, "four-gpus", 4).await;
    claiming_gang(&ns, &queue, "train", 4, "four-gpus").await;

    let pods = ns.api::<Pod>();
    let nodes = eventually("the four members to run", 60, || async {
        let on = running_on(&pods, "train").await;
        (on.len() == 4).then_some(on)
    })
    .await;
    for node in &nodes {
        assert!(
            gpus.nodes.contains(node),
            "{node} has no devices: {nodes:?}"
        );
    }
    let resource = gpus.resource();
    let held = eventually("the queue to count 16 devices", 30, || async {
        allocated(&cluster.client, &queue, &resource)
            .await
            .filter(|q| q == "16")
    })
    .await;
    assert_eq!(held, "16");

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
    gpus.remove().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_beyond_its_queues_capability_in_a_device_class_waits_naming_the_class() {
    let cluster = Cluster::connect().await;
    let gpus = Gpus::publish(&cluster).await;
    let resource = gpus.resource();
    let spec = QueueSpec {
        capability: [(resource.clone(), Quantity("8".into()))].into(),
        ..QueueSpec::default()
    };
    let queue = create_queue(&cluster.client, "dra-capped", spec).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("dra-capped").await;
    gpus.template(&ns, "four-gpus", 4).await;
    claiming_gang(&ns, &queue, "first", 2, "four-gpus").await;
    let pods = ns.api::<Pod>();
    eventually("the first gang (8 devices) to run", 60, || async {
        (running_on(&pods, "first").await.len() == 2).then_some(())
    })
    .await;

    claiming_gang(&ns, &queue, "second", 1, "four-gpus").await;
    let groups = ns.api::<PodGroup>();
    let (reason, message) = eventually("the second gang to say why it waits", 30, || async {
        not_admitted(&groups, "second").await
    })
    .await;
    assert_eq!(reason, "CapabilityReached", "{message}");
    assert!(
        message.contains(&format!("{resource} 8 held + 4 requested > capability 8")),
        "{message}"
    );
    // The CLI shows the class like any resource.
    let queues = gangplank(&["queues"]);
    let line = queues
        .lines()
        .find(|l| l.contains(&queue))
        .unwrap_or_else(|| panic!("no {queue} in:\n{queues}"));
    assert!(line.contains(&format!("{resource}:8")), "{line}");
    let story = gangplank(&["why", "pg/second", "-n", &ns.name]);
    assert!(story.contains(&resource), "{story}");
    holds_for(5, "the second gang waiting", async || {
        running_on(&pods, "second").await.is_empty()
    })
    .await;

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
    gpus.remove().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_asking_for_more_devices_than_are_free_waits_and_holds_no_member_on_a_node() {
    let cluster = Cluster::connect().await;
    let gpus = Gpus::publish(&cluster).await;
    let queue = create_queue(&cluster.client, "dra-big", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("dra-big").await;
    gpus.template(&ns, "four-gpus", 4).await;
    // 5 × 4 = 20 devices; the cluster has 16.
    claiming_gang(&ns, &queue, "big", 5, "four-gpus").await;

    let groups = ns.api::<PodGroup>();
    let (reason, message) = eventually("the gang to say why it waits", 30, || async {
        not_admitted(&groups, "big").await
    })
    .await;
    assert_eq!(reason, "DoesNotFit", "{message}");
    assert!(message.contains(&gpus.resource()), "{message}");
    let pods = ns.api::<Pod>();
    holds_for(5, "no member bound", async || {
        crate::support::bound_with_prefix(&pods, "big")
            .await
            .is_empty()
    })
    .await;

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
    gpus.remove().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_asking_for_a_class_whose_selector_gangplank_cannot_evaluate_waits_saying_why() {
    let cluster = Cluster::connect().await;
    // The devices have no `memory` attribute: the selector fails on each of them.
    let gpus = Gpus::publish_selecting(&cluster, |driver| {
        format!("device.attributes[{driver:?}].memory > 1")
    })
    .await;
    let queue = create_queue(&cluster.client, "dra-broken", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("dra-broken").await;
    gpus.template(&ns, "one-gpu", 1).await;
    claiming_gang(&ns, &queue, "lost", 1, "one-gpu").await;

    let groups = ns.api::<PodGroup>();
    let (reason, message) = eventually("the gang to say why it waits", 30, || async {
        not_admitted(&groups, "lost")
            .await
            .filter(|(_, message)| message.contains("DeviceClass"))
    })
    .await;
    assert_eq!(reason, "DoesNotFit", "{message}");
    assert!(
        message.contains(&format!(
            "DeviceClass {} counts no device as Gangplank reads it: a selector failed",
            gpus.class
        )),
        "{message}"
    );
    // The class counts no device, and the metric that says so names it, until the class goes.
    let class = [("class", gpus.class.as_str())];
    eventually(
        "gangplank_dra_class_errors to name the class",
        30,
        || async {
            let metrics = cluster.gangplank_metrics().await;
            (metrics.sum("gangplank_dra_class_errors", &class) == 1.0).then_some(())
        },
    )
    .await;

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
    let class = gpus.class.clone();
    gpus.remove().await;
    eventually(
        "gangplank_dra_class_errors to forget the class",
        30,
        || async {
            let metrics = cluster.gangplank_metrics().await;
            (metrics.sum("gangplank_dra_class_errors", &[("class", &class)]) == 0.0).then_some(())
        },
    )
    .await;
}
