//! Whose review is read, decoded and decided when: the bound on the memory the webhook port
//! spends on AdmissionReviews, and on how long a review may wait for it.
//!
//! A review is read whole, decoded into its object and decided while the object lives, so its
//! cost in memory is a few times its body. The port is open to anything on the pod network,
//! and [`MAX_BODY_BYTES`](super::MAX_BODY_BYTES) is large enough for an object near etcd's
//! limit, twice: unbounded, a flood of large bodies takes the process' memory (200
//! connections posting 7.6 MiB each took it from 52 to 938 MiB). Bounding every review the same
//! way would let a few clients that trickle their bodies hold every turn until their body
//! deadline, and then every managed pod's creation fails closed. So reviews take one of two
//! lanes, by the size their `content-length` declares:
//! - a **small** review (at most [`Limits::small_bytes`], which holds every pod, Job or
//!   PodGroup a person writes) is read first, without waiting for anyone, so the bodies being
//!   read take at most the port's connections times that size; then it waits for one of
//!   [`Limits::small`] turns to be decoded and decided. A client cannot hold a turn by being
//!   slow: it has sent its whole body before it takes one.
//! - a **large** review (more, or of no declared size) waits for one of [`Limits::large`]
//!   turns before its body is read, and holds it until answered. Slow clients can make other
//!   large reviews wait, never small ones.
//!
//! A review that declares a body over [`MAX_BODY_BYTES`] is refused with 413 at once, unread.
//! A review that waited [`Limits::wait`] for its turn is answered 503: by then the API server
//! (10 s by default) has given up on it, and applies the registration's failure policy.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Error, Hook, MAX_BODY_BYTES};

/// The sizes of the two lanes, and how long a review may wait for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest body a small review declares.
    pub small_bytes: usize,
    /// Small reviews decoded and decided at once.
    pub small: usize,
    /// Large reviews read, decoded and decided at once.
    pub large: usize,
    /// How long a review may wait for its turn.
    pub wait: Duration,
}

impl Default for Limits {
    /// 64 KiB holds a pod of a hundred containers; 32 small turns cost at most a few MiB
    /// and decide far more reviews a second than the API server sends; 4 large turns cost at
    /// most about 4 x 4 MiB of body and a few times that decoded.
    fn default() -> Self {
        Limits {
            small_bytes: 64 * 1024,
            small: 32,
            large: 4,
            wait: Duration::from_secs(10),
        }
    }
}

/// The turns of one webhook port.
#[derive(Debug, Clone)]
pub struct Turns {
    limits: Limits,
    small: Arc<Semaphore>,
    large: Arc<Semaphore>,
}

impl Turns {
    pub fn new(limits: Limits) -> Turns {
        Turns {
            limits,
            small: Arc::new(Semaphore::new(limits.small)),
            large: Arc::new(Semaphore::new(limits.large)),
        }
    }

    /// Waits for a turn in `lane` (named `name` in the gauge of turns taken), at most
    /// [`Limits::wait`].
    async fn take(
        &self,
        lane: &Arc<Semaphore>,
        name: &'static str,
        hook: Hook,
    ) -> Result<Turn, Response> {
        match tokio::time::timeout(self.limits.wait, lane.clone().acquire_owned()).await {
            Ok(Ok(permit)) => {
                let taken = ::metrics::gauge!(crate::metrics::WEBHOOK_TURNS_TAKEN, "lane" => name);
                taken.increment(1.0);
                Ok(Turn {
                    _permit: permit,
                    taken,
                })
            }
            Ok(Err(_)) | Err(_) => {
                let busy = Error::Busy {
                    hook,
                    waited: self.limits.wait,
                };
                tracing::warn!(error = %busy, "webhook busy");
                Err((StatusCode::SERVICE_UNAVAILABLE, format!("{busy}\n")).into_response())
            }
        }
    }
}

/// A review's turn, counted in `gangplank_webhook_turns_taken` until it is answered.
struct Turn {
    _permit: OwnedSemaphorePermit,
    taken: ::metrics::Gauge,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.taken.decrement(1.0);
    }
}

/// The middleware of every webhook route: gives the request its turn, in its lane.
pub async fn take_turn(
    State((turns, hook)): State<(Turns, Hook)>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    match declared {
        Some(size) if size > MAX_BODY_BYTES => {
            let why = format!("its body of {size} bytes is over the limit of {MAX_BODY_BYTES}");
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("{}\n", Error::Read { hook, why }),
            )
                .into_response()
        }
        Some(size) if size <= turns.limits.small_bytes => {
            let (parts, body) = request.into_parts();
            let body = match Bytes::from_request(Request::new(body), &()).await {
                Ok(body) => body,
                Err(e) => {
                    let (status, why) = (e.status(), e.body_text());
                    return (status, format!("{}\n", Error::Read { hook, why })).into_response();
                }
            };
            let _turn = match turns.take(&turns.small, "small", hook).await {
                Ok(turn) => turn,
                Err(busy) => return busy,
            };
            next.run(Request::from_parts(parts, Body::from(body))).await
        }
        _ => {
            let _turn = match turns.take(&turns.large, "large", hook).await {
                Ok(turn) => turn,
                Err(busy) => return busy,
            };
            next.run(request).await
        }
    }
}
