//! Bounds on the connections a server holds ([`Limited`], an `axum_server` acceptor around the
//! TLS or plain one), so that a flood of idle, slow or half-open clients cannot take every
//! file descriptor of the process, the memory of their buffers, or the places of the clients
//! that matter (the scheduler, the API server, Prometheus):
//! - a connection still in its TLS handshake takes one of a small budget of handshakes (and is
//!   cut off at the handshake deadline); one beyond that budget is closed as soon as it is
//!   accepted;
//! - a connection takes one of the places of open connections only once its handshake is done,
//!   and one beyond them is closed then;
//! - an open connection with no request in flight for the idle deadline is closed, whatever its
//!   protocol: a client silent after connecting, one trickling its headers (HTTP/1) or its
//!   HEADERS frames (HTTP/2), and a keep-alive connection left idle. A request in flight (a
//!   held bind, for minutes) keeps its connection open; its body has its own deadline
//!   (`server::serve`).
//!
//! Refused connections are counted by what was full
//! (`gangplank_server_connections_refused_total{stage}`), the open ones are a gauge
//! (`gangplank_server_connections`), and each closed one is counted by how it ended
//! ([`Ending`], `gangplank_server_connections_closed_total`), which is how an operator sees the
//! deadlines at work, or a client without the right certificate. The scheduler and the API
//! server each keep a few connections to Gangplank, far below the bounds.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::accept::Accept;
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics;
use crate::server::Bounds;

pub mod body;

/// Connections each server holds open at once.
pub const MAX_CONNECTIONS: usize = 1024;

/// Connections each server lets do their TLS handshake at once. A client that completes its
/// handshake does it in milliseconds, so this many hold the budget only in a flood.
pub const MAX_HANDSHAKES: usize = 128;

/// Which of the two budgets was full when a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Handshake,
    Open,
}

impl Stage {
    fn label(self) -> &'static str {
        match self {
            Stage::Handshake => "handshake",
            Stage::Open => "open",
        }
    }

    fn refused(self, server: &'static str) -> ::metrics::Counter {
        ::metrics::counter!(metrics::SERVER_CONNECTIONS_REFUSED_TOTAL,
            "server" => server, "stage" => self.label())
    }
}

/// An acceptor that lets at most `bounds.handshakes` connections of the server `server` do
/// their TLS handshake and holds at most `bounds.connections` open at once, and closes one idle
/// for `bounds.idle`.
#[derive(Clone)]
pub struct Limited<A> {
    inner: A,
    handshakes: Arc<Semaphore>,
    connections: Arc<Semaphore>,
    idle: Duration,
    server: &'static str,
}

impl<A> Limited<A> {
    pub fn new(inner: A, bounds: Bounds, server: &'static str) -> Limited<A> {
        ::metrics::gauge!(metrics::SERVER_CONNECTIONS, "server" => server).set(0.0);
        for stage in [Stage::Handshake, Stage::Open] {
            stage.refused(server).absolute(0);
        }
        for ending in Ending::ALL {
            ending.counter(server).absolute(0);
        }
        Limited {
            inner,
            handshakes: Arc::new(Semaphore::new(bounds.handshakes)),
            connections: Arc::new(Semaphore::new(bounds.connections)),
            idle: bounds.idle,
            server,
        }
    }
}

fn refuse(stage: Stage, server: &'static str) -> io::Error {
    stage.refused(server).increment(1);
    let what = match stage {
        Stage::Handshake => "TLS handshakes",
        Stage::Open => "open connections",
    };
    io::Error::other(format!(
        "the {server} holds its most {what}; closing this connection"
    ))
}

type Accepted<S, T> = io::Result<(Counted<S>, Tracked<T>)>;

impl<A, I, S> Accept<I, S> for Limited<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Counted<A::Stream>;
    type Service = Tracked<A::Service>;
    type Future = Pin<Box<dyn Future<Output = Accepted<A::Stream, A::Service>> + Send>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let server = self.server;
        let Ok(handshake) = self.handshakes.clone().try_acquire_owned() else {
            drop(stream);
            return Box::pin(std::future::ready(Err(refuse(Stage::Handshake, server))));
        };
        let accepting = self.inner.accept(stream, service);
        let (connections, idle) = (self.connections.clone(), self.idle);
        Box::pin(async move {
            let (stream, service) = accepting.await.inspect_err(|e| {
                Ending::of_handshake(e).counter(server).increment(1);
            })?;
            drop(handshake);
            let Ok(permit) = connections.try_acquire_owned() else {
                return Err(refuse(Stage::Open, server));
            };
            ::metrics::gauge!(metrics::SERVER_CONNECTIONS, "server" => server).increment(1.0);
            let activity = Arc::new(Activity::default());
            Ok((
                Counted {
                    inner: stream,
                    held: Held {
                        _permit: permit,
                        server,
                    },
                    ended_by_client: false,
                    mid_request: false,
                    activity: activity.clone(),
                    idle,
                    idle_since: None,
                },
                Tracked {
                    inner: service,
                    activity,
                },
            ))
        })
    }
}

/// One open connection's place: given back, and the gauge lowered, when it is dropped.
struct Held {
    _permit: OwnedSemaphorePermit,
    server: &'static str,
}

impl Drop for Held {
    fn drop(&mut self) {
        ::metrics::gauge!(metrics::SERVER_CONNECTIONS, "server" => self.server).decrement(1.0);
    }
}

/// The requests of one connection: how many are in flight, and how many times that number
/// changed (so that its stream restarts the idle deadline after each request).
#[derive(Debug, Default)]
struct Activity {
    in_flight: AtomicU64,
    changes: AtomicU64,
}

impl Activity {
    fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.changes.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }
}

/// A request in flight on its connection, until dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changes.fetch_add(1, Ordering::SeqCst);
    }
}

/// A connection's service, counting its requests in flight until each is answered.
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S, R> tower::Service<R> for Tracked<S>
where
    S: tower::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let in_flight = self.activity.start();
        let answering = self.inner.call(request);
        Box::pin(async move {
            let answer = answering.await;
            drop(in_flight);
            answer
        })
    }
}

/// How a connection ended, as `gangplank_server_connections_closed_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The client closed it, or it broke.
    Client,
    /// Gangplank closed it with nothing of a request unread: a keep-alive connection, or one
    /// that never sent a request, idle past the idle deadline; after the answer to a body
    /// that missed its deadline; at shutdown.
    BetweenRequests,
    /// Gangplank closed it while a request was arriving or unanswered: headers trickled past
    /// the idle deadline, mostly.
    MidRequest,
    /// The TLS handshake did not finish within its deadline.
    HandshakeTimeout,
    /// The TLS handshake failed: no client certificate, or one the client CA did not sign, or
    /// not TLS at all.
    HandshakeFailed,
    /// The client certificate was signed by the client CA but names another client than the
    /// one allowed ([`crate::tls::WrongClient`]).
    WrongClient,
}

impl Ending {
    const ALL: [Ending; 6] = [
        Ending::Client,
        Ending::BetweenRequests,
        Ending::MidRequest,
        Ending::HandshakeTimeout,
        Ending::HandshakeFailed,
        Ending::WrongClient,
    ];

    fn label(self) -> &'static str {
        match self {
            Ending::Client => "client",
            Ending::BetweenRequests => "server_between_requests",
            Ending::MidRequest => "server_mid_request",
            Ending::HandshakeTimeout => "handshake_timeout",
            Ending::HandshakeFailed => "handshake_failed",
            Ending::WrongClient => "wrong_client",
        }
    }

    fn of_handshake(error: &io::Error) -> Ending {
        let refused = error
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>());
        if error.kind() == io::ErrorKind::TimedOut {
            Ending::HandshakeTimeout
        } else if let Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(
            other,
        ))) = refused
            && other.0.is::<crate::tls::WrongClient>()
        {
            Ending::WrongClient
        } else {
            Ending::HandshakeFailed
        }
    }

    fn counter(self, server: &'static str) -> ::metrics::Counter {
        ::metrics::counter!(metrics::SERVER_CONNECTIONS_CLOSED_TOTAL,
            "server" => server, "reason" => self.label())
    }
}

/// A connection's stream that holds its place among the open ones while it lives, and tells
/// how it ended when it is dropped.
pub struct Counted<S> {
    inner: S,
    held: Held,
    /// A read saw the end of the stream or an error.
    ended_by_client: bool,
    /// Bytes arrived since the last answer was written.
    mid_request: bool,
    activity: Arc<Activity>,
    /// How long the connection may go with no request in flight.
    idle: Duration,
    /// The idle deadline running, and the count of [`Activity::changes`] it started at.
    idle_since: Option<(u64, Pin<Box<tokio::time::Sleep>>)>,
}

impl<S> Counted<S> {
    /// Whether the connection has been idle for its deadline; while it has not, the caller's
    /// task is woken when it will have.
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        let changes = self.activity.changes.load(Ordering::SeqCst);
        if self.activity.in_flight.load(Ordering::SeqCst) > 0 {
            self.idle_since = None;
            return false;
        }
        let idle = self.idle;
        let (since, deadline) = self
            .idle_since
            .get_or_insert_with(|| (changes, Box::pin(tokio::time::sleep(idle))));
        if *since != changes {
            *since = changes;
            deadline.as_mut().reset(tokio::time::Instant::now() + idle);
        }
        deadline.as_mut().poll(cx).is_ready()
    }
}

impl<S> Drop for Counted<S> {
    fn drop(&mut self) {
        let ending = if self.ended_by_client {
            Ending::Client
        } else if self.mid_request {
            Ending::MidRequest
        } else {
            Ending::BetweenRequests
        };
        ending.counter(self.held.server).increment(1);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let (before, room) = (buf.filled().len(), buf.remaining());
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &read {
            Poll::Ready(Ok(())) if buf.filled().len() == before && room > 0 => {
                self.ended_by_client = true
            }
            Poll::Ready(Ok(())) if buf.filled().len() == before => {}
            Poll::Ready(Ok(())) => self.mid_request = true,
            Poll::Ready(Err(_)) => self.ended_by_client = true,
            Poll::Pending if self.idle_expired(cx) => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request arrived within the idle deadline",
                )));
            }
            Poll::Pending => {}
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(_))) {
            self.mid_request = false;
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(written, Poll::Ready(Ok(_))) {
            self.mid_request = false;
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
