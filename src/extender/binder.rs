//! Creating the `pods/binding` subresource, behind a trait.
//!
//! An extender with a `bindVerb` replaces the scheduler's default binder, so Gangplank must
//! write the Binding itself. The handler only sees [`Binder`]: [`KubeBinder`] talks to the API
//! server, tests use a fake that records calls, and the gang logic will wrap it to hold binds
//! until quorum.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use super::Error;

/// One pod to bind to one node, as the scheduler asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindRequest {
    pub namespace: String,
    pub name: String,
    /// The pod's UID; empty means "whatever pod has this name".
    pub uid: String,
    pub node: String,
}

impl BindRequest {
    /// The error to answer when binding failed for `why`.
    pub fn failed(&self, why: impl Into<String>) -> Error {
        Error::Bind {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            node: self.node.clone(),
            why: why.into(),
        }
    }

    /// The Binding object, as the default binder builds it: namespace, name and UID (so the API
    /// server refuses to bind a pod that was deleted and recreated under the same name), and a
    /// target of kind Node.
    pub fn binding(&self) -> Binding {
        Binding {
            metadata: ObjectMeta {
                namespace: Some(self.namespace.clone()),
                name: Some(self.name.clone()),
                uid: (!self.uid.is_empty()).then(|| self.uid.clone()),
                ..Default::default()
            },
            target: ObjectReference {
                kind: Some("Node".into()),
                name: Some(self.node.clone()),
                ..Default::default()
            },
        }
    }
}

/// Binds pods to nodes.
pub trait Binder: Send + Sync + 'static {
    /// Binds, or says why not (an [`Error::Bind`]).
    fn bind<'a>(&'a self, request: &'a BindRequest) -> BoxFuture<'a, Result<(), Error>>;
}

/// Bindings in flight at once. Gangs that reach quorum together bind all their members at
/// once; sent all at once, hundreds of Bindings overflow the API server's
/// priority-and-fairness queues, which answer 429, and the client retries only after a backoff.
pub const BINDS_IN_FLIGHT: usize = 32;

/// Binds through the API server's `pods/binding` subresource, [`BINDS_IN_FLIGHT`] at a time.
pub struct KubeBinder {
    client: kube::Client,
    in_flight: tokio::sync::Semaphore,
}

impl KubeBinder {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            in_flight: tokio::sync::Semaphore::new(BINDS_IN_FLIGHT),
        }
    }
}

impl Binder for KubeBinder {
    fn bind<'a>(&'a self, request: &'a BindRequest) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let _turn = self.in_flight.acquire().await.expect("never closed");
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &request.namespace);
            pods.create_subresource::<_, serde_json::Value>(
                "binding",
                &request.name,
                &PostParams::default(),
                &request.binding(),
            )
            .await
            .map(drop)
            .map_err(|e| request.failed(api_reason(&e)))
        })
    }
}

/// The API server's own message when there is one ("pods \"p\" not found"), else the error.
fn api_reason(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_carries_the_pod_uid_and_targets_the_node() {
        let request = BindRequest {
            namespace: "ml".into(),
            name: "worker-0".into(),
            uid: "6f1c".into(),
            node: "n1".into(),
        };
        assert_eq!(
            serde_json::to_value(request.binding()).unwrap(),
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"namespace": "ml", "name": "worker-0", "uid": "6f1c"},
                "target": {"kind": "Node", "name": "n1"}
            })
        );
    }

    #[test]
    fn a_failure_names_pod_node_and_reason() {
        let request = BindRequest {
            namespace: "ml".into(),
            name: "worker-0".into(),
            uid: String::new(),
            node: "n1".into(),
        };
        assert_eq!(
            request.failed("pods \"worker-0\" not found").to_string(),
            "failed to bind pod ml/worker-0 to node n1: pods \"worker-0\" not found"
        );
        assert!(request.binding().metadata.uid.is_none());
    }
}
