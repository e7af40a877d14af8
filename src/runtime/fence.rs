//! The fence: whether this replica may still write as the leader.
//!
//! A leader that loses its Lease must make no write after the moment another replica may take
//! the Lease over; stopping its loops is not enough, since a pass, a reconcile or a bind that
//! began while it led would finish its writes. So every write the leader's parts make goes
//! through a Kubernetes client built by [`client`], whose innermost layer asks the fence
//! before each request that is not a read (`GET`, `HEAD`: watches and lists pass): the
//! admission loop's gate removals, evictions, admitted-ahead annotations and Events, the
//! controller's and the batch Job controller's writes, the extender's Bindings. A write the
//! fence refuses is not sent; it fails with [`Closed`] and is counted in
//! `gangplank_fenced_writes_total` by reason. The client's retries of HTTP 429, 503 and 504
//! (kube's `RetryPolicy::server_retry`) sit outside the fence, so each retry asks it again.
//!
//! One writer: the elector ([`crate::runtime::leader::Elector`]) opens the fence each time it takes or
//! renews the Lease, until the instant it sent that renewal plus its renew deadline (two
//! thirds of the Lease's duration), and closes it when it stops leading or gives the Lease
//! up. Another replica may take the Lease only once it has seen the renewal unchanged for the
//! whole duration on its own clock, so the fence closes a third of the duration before that,
//! whether or not this replica hears back from the API server. Without leader election
//! ([`Fence::always`]) it never closes. Readers: the clients above, the admission loop (to
//! skip a pass's writes at once), and the pod webhook, which admits gangs on arrival only
//! while the fence is open (only the leader's ledger counts arrivals).
//!
//! What it cannot stop: a request sent just before the fence closed that the network delays
//! past the takeover. The third of the duration left (5 s of the default 15 s) is the margin
//! for that and for the replicas' clocks running at different rates.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use http::{Method, Request};
use kube::client::{Body, ClientBuilder};
use tokio::time::Instant;
use tower::{BoxError, Layer, Service};

use crate::runtime::metrics;

/// How many requests wait for the fenced service at once (kube's own client buffers 1,024).
const BUFFERED: usize = 1024;

/// May this replica still write as the leader; see the module docs. Cheap to clone and to ask.
#[derive(Debug, Clone)]
pub struct Fence {
    open: Arc<Mutex<Open>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// Not leading: never held the Lease, lost it, or gave it up.
    Never,
    /// Leading, until the instant the last renewal was sent plus the renew deadline.
    Until(Instant),
    /// No leader election: this is the only replica.
    Always,
}

/// A write the fence refused: the error a fenced client's request fails with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("failed to write: {}", .0.why())]
pub struct Closed(pub ClosedReason);

/// Why the fence is closed: the label of `gangplank_fenced_writes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClosedReason {
    /// The last renewal is older than the renew deadline: another replica may soon take over.
    Lapsed,
    /// This replica does not hold the Lease.
    NotLeading,
}

impl ClosedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ClosedReason::Lapsed => "lapsed",
            ClosedReason::NotLeading => "not_leading",
        }
    }

    fn why(self) -> &'static str {
        match self {
            ClosedReason::Lapsed => {
                "this replica's leader Lease was not renewed in time, so another replica may take it over; not written"
            }
            ClosedReason::NotLeading => "this replica does not hold the leader Lease; not written",
        }
    }
}

impl Fence {
    /// A closed fence, for a replica that takes part in leader election: the elector opens it.
    pub fn closed() -> Fence {
        Fence::with(Open::Never)
    }

    /// A fence that never closes, for a replica that runs alone (no leader election).
    pub fn always() -> Fence {
        Fence::with(Open::Always)
    }

    fn with(open: Open) -> Fence {
        Fence {
            open: Arc::new(Mutex::new(open)),
        }
    }

    /// Opens the fence until `until` (the elector, after taking or renewing the Lease).
    pub fn open_until(&self, until: Instant) {
        let mut open = self.lock();
        if *open != Open::Always {
            *open = Open::Until(until);
        }
    }

    /// Closes the fence (the elector, when it stops leading or gives the Lease up).
    pub fn close(&self) {
        let mut open = self.lock();
        if *open != Open::Always {
            *open = Open::Never;
        }
    }

    /// When the fence closes unless renewed; `None` when it is closed or never closes.
    pub fn closes_at(&self) -> Option<Instant> {
        match *self.lock() {
            Open::Until(until) => Some(until),
            Open::Never | Open::Always => None,
        }
    }

    /// Why a write now would be refused; `Ok` while this replica may write.
    pub fn check(&self) -> Result<(), Closed> {
        match *self.lock() {
            Open::Always => Ok(()),
            Open::Until(until) if Instant::now() < until => Ok(()),
            Open::Until(_) => Err(Closed(ClosedReason::Lapsed)),
            Open::Never => Err(Closed(ClosedReason::NotLeading)),
        }
    }

    pub fn is_open(&self) -> bool {
        self.check().is_ok()
    }

    /// The layer that asks this fence before each write (see [`client`]).
    pub fn layer(&self) -> FenceLayer {
        FenceLayer {
            fence: self.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `error` is a write the fence refused.
pub fn refused(error: &kube::Error) -> bool {
    match error {
        kube::Error::Service(e) => e.downcast_ref::<Closed>().is_some(),
        _ => false,
    }
}

/// A Kubernetes client from `config` whose writes ask `fence` first, each retry included;
/// retries HTTP 429, 503 and 504 as kube's default client does when `config.default_retry`.
pub fn client(mut config: kube::Config, fence: &Fence) -> Result<kube::Client, kube::Error> {
    let retry = std::mem::replace(&mut config.default_retry, false);
    Ok(fenced(ClientBuilder::try_from(config)?, fence, retry))
}

/// `builder`'s service with the fence inside and, when `retry`, kube's server-aware retries
/// outside it; a buffer between them gives the retries the cloneable service they need.
fn fenced<S, B>(builder: ClientBuilder<S>, fence: &Fence, retry: bool) -> kube::Client
where
    S: Service<Request<Body>, Response = http::Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + Sync,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let builder = builder
        .with_layer(&fence.layer())
        .with_layer(&tower::buffer::BufferLayer::new(BUFFERED));
    if retry {
        builder
            .with_layer(&tower::retry::RetryLayer::new(
                kube::client::retry::RetryPolicy::server_retry(),
            ))
            .build()
    } else {
        builder.build()
    }
}

/// See [`Fence::layer`].
#[derive(Debug, Clone)]
pub struct FenceLayer {
    fence: Fence,
}

impl<S> Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// A service that refuses writes while its fence is closed.
#[derive(Debug, Clone)]
pub struct Fenced<S> {
    inner: S,
    fence: Fence,
}

type Answer<R> = Pin<Box<dyn Future<Output = Result<R, BoxError>> + Send>>;

impl<S> Service<Request<Body>> for Fenced<S>
where
    S: Service<Request<Body>>,
    S::Response: Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Answer<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let read = matches!(*request.method(), Method::GET | Method::HEAD);
        if !read && let Err(closed) = self.fence.check() {
            ::metrics::counter!(metrics::FENCED_WRITES_TOTAL, "reason" => closed.0.as_str())
                .increment(1);
            tracing::debug!(method = %request.method(), path = request.uri().path(), reason = closed.0.as_str(), "write refused by the fence");
            return Box::pin(std::future::ready(Err(closed.into())));
        }
        let answer = self.inner.call(request);
        Box::pin(async move { answer.await.map_err(Into::into) })
    }
}

#[cfg(test)]
pub mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, Patch, PatchParams};

    use super::*;

    /// A fake API server: answers every request after `delay` with an empty Pod, and records
    /// each request's method, path and when it arrived (on tokio's clock).
    #[derive(Debug, Clone, Default)]
    pub struct Recorder {
        pub seen: Arc<Mutex<Vec<(Method, String, Instant)>>>,
    }

    impl Recorder {
        /// A fenced client over this fake, as [`client`] builds one (retries included).
        pub fn client(&self, fence: &Fence, delay: Duration) -> kube::Client {
            let seen = self.seen.clone();
            let service = tower::service_fn(move |request: Request<Body>| {
                seen.lock().unwrap().push((
                    request.method().clone(),
                    request.uri().path().to_owned(),
                    Instant::now(),
                ));
                async move {
                    tokio::time::sleep(delay).await;
                    let body = serde_json::json!({
                        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
                    });
                    Ok::<_, BoxError>(
                        http::Response::builder()
                            .status(200)
                            .header("content-type", "application/json")
                            .body(Body::from(serde_json::to_vec(&body).unwrap()))
                            .unwrap(),
                    )
                }
            });
            fenced(ClientBuilder::new(service, "default"), fence, true)
        }

        /// The writes that reached the API server.
        pub fn writes(&self) -> Vec<(Method, String, Instant)> {
            let seen = self.seen.lock().unwrap();
            seen.iter()
                .filter(|(m, ..)| *m != Method::GET)
                .cloned()
                .collect()
        }
    }

    async fn label(pods: &Api<Pod>) -> Result<Pod, kube::Error> {
        let patch = serde_json::json!({"metadata": {"labels": {"a": "b"}}});
        pods.patch("p", &PatchParams::default(), &Patch::Merge(&patch))
            .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_fence_opened_by_a_renewal_closes_at_its_deadline_and_refuses_writes_but_not_reads() {
        let fence = Fence::closed();
        let api = Recorder::default();
        let pods: Api<Pod> = Api::namespaced(api.client(&fence, Duration::ZERO), "ns");
        let err = label(&pods).await.unwrap_err();
        assert!(refused(&err), "{err}");
        assert!(
            err.to_string().contains("does not hold the leader Lease"),
            "{err}"
        );

        fence.open_until(Instant::now() + Duration::from_secs(10));
        label(&pods).await.expect("written while the fence is open");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let err = label(&pods).await.unwrap_err();
        assert!(refused(&err), "{err}");
        assert!(err.to_string().contains("was not renewed in time"), "{err}");
        pods.get("p").await.expect("reads pass a closed fence");

        assert_eq!(
            api.writes().len(),
            1,
            "only the write made while open reached the API"
        );
        assert_eq!(api.seen.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fence_without_leader_election_never_closes() {
        let fence = Fence::always();
        fence.close();
        fence.open_until(Instant::now());
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(fence.is_open());
    }
}
