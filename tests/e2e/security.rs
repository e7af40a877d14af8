//! Who may call the extender: only a client with the scheduler's certificate gets past the TLS
//! handshake (`e2e/up` starts Gangplank with `--extender-client-ca-file`, and every gang test
//! shows the stock scheduler passing it), and even the scheduler's binds are limited to pods
//! Gangplank manages.

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::json;

use crate::support::{Cluster, call_extender, pod};

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn only_the_scheduler_reaches_bind_and_a_pod_gangplank_does_not_manage_stays_unbound() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("bind-scope").await;
    let pods = ns.api::<Pod>();
    // A pod meant for another scheduler, on no node it could ever run on.
    let created = pods
        .create(
            &PostParams::default(),
            &pod(json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "elsewhere"},
                "spec": {"schedulerName": "another-scheduler",
                    "nodeSelector": {"example.com/no-such-label": "x"},
                    "containers": [{"name": "main", "image": "busybox"}]}
            })),
        )
        .await
        .unwrap();
    let body = json!({
        "PodName": "elsewhere", "PodNamespace": ns.name,
        "PodUID": created.metadata.uid.unwrap(), "Node": "kwok-node-0"
    });

    let (ok, printed) = call_extender(&cluster, "bind", &body, false);
    assert!(
        !ok && printed.is_empty(),
        "a caller without the scheduler's certificate got an answer: {printed}"
    );

    let (ok, printed) = call_extender(&cluster, "bind", &body, true);
    assert!(ok, "the scheduler's certificate is refused");
    let answer: serde_json::Value = serde_json::from_str(&printed).unwrap();
    let error = answer["Error"].as_str().unwrap_or_default();
    assert!(
        error.contains("does not carry the marker resource scheduling.gangplank.dev/managed"),
        "{answer}"
    );

    let pod = pods.get("elsewhere").await.unwrap();
    assert_eq!(pod.spec.unwrap().node_name, None, "the pod was bound");
    ns.delete().await;
}
