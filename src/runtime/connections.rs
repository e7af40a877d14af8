//! Bounds on the connections a server holds ([`Limited`], an `axum_server` acceptor around the
//! TLS or plain one), so that a flood of idle, slow or half-open clients can take neither every
//! file descriptor of the process, nor the memory of their buffers, nor the places of the
//! clients that matter (the scheduler, the API server, Prometheus):
//! - a connection in its TLS handshake holds one of a small set of handshake places (and is
//!   cut off at the handshake deadline); a connection open after its handshake holds one of
//!   the open places. When none is free, a newcomer takes the place of the holder that has
//!   come least far, the oldest first, whatever its address ([`places`]); when every holder
//!   must keep its place (not read yet, or a request in flight), it is refused;
//! - a connection refused, or that gave its place up, is held unread until the handshake
//!   deadline before it is closed ([`tarpit`], its room a share of the file descriptor
//!   limit), so that a flood reconnecting at once does not turn each refusal into another
//!   connection;
//! - an open connection with no request in flight for the idle deadline is closed, whatever its
//!   protocol: a client silent after connecting, one trickling its headers (HTTP/1) or its
//!   HEADERS frames (HTTP/2), and a keep-alive connection left idle. A request in flight (a
//!   held bind, for minutes) keeps its connection open; its body has its own deadline
//!   (`super::port::serve`).
//!
//! Refused connections are counted (`gangplank_server_connections_refused_total`), the ones
//! in their handshake, open, and held unread are gauges (`gangplank_server_handshakes`,
//! `gangplank_server_connections`, `gangplank_server_connections_held_unread`), and
//! each closed one is counted by how it ended ([`Ending`],
//! `gangplank_server_connections_closed_total`), which is how an operator sees a flood shed,
//! the deadlines at work, or a client without the right certificate. The scheduler and the API
//! server each keep a few connections to Gangplank, far below the bounds.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::accept::Accept;
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::runtime::metrics;

pub mod body;
mod bounds;
pub mod places;
pub mod tarpit;

pub use bounds::Bounds;

use places::{Place, Places, Progress};
use tarpit::Tarpit;

/// Connections each server holds open at once.
pub const MAX_CONNECTIONS: usize = 1024;

/// Connections each server lets do their TLS handshake at once. A client that completes its
/// handshake does it in milliseconds, so this many are all taken only in a flood, and then
/// by the flood's own connections, which give their places up first.
pub const MAX_HANDSHAKES: usize = 128;

/// An acceptor that gives each connection of the server `server` one of `bounds.handshakes`
/// places during its TLS handshake and one of `bounds.connections` once open (shedding the
/// holder that has come least far, or refusing the newcomer, when none is free), holds refused
/// and shed connections unread until `bounds.handshake`, and closes one idle for
/// `bounds.idle`.
#[derive(Clone)]
pub struct Limited<A> {
    inner: A,
    handshakes: Arc<Places>,
    connections: Arc<Places>,
    tarpit: Arc<Tarpit>,
    idle: Duration,
    server: &'static str,
}

impl<A> Limited<A> {
    pub fn new(inner: A, bounds: Bounds, server: &'static str) -> Limited<A> {
        refused(server).absolute(0);
        for ending in Ending::ALL {
            ending.counter(server).absolute(0);
        }
        Limited {
            inner,
            handshakes: Places::new(
                bounds.handshakes,
                ::metrics::gauge!(metrics::SERVER_HANDSHAKES, "server" => server),
            ),
            connections: Places::new(
                bounds.connections,
                ::metrics::gauge!(metrics::SERVER_CONNECTIONS, "server" => server),
            ),
            tarpit: Tarpit::new(
                tarpit::room(),
                bounds.handshake,
                ::metrics::gauge!(metrics::SERVER_CONNECTIONS_HELD_UNREAD, "server" => server),
            ),
            idle: bounds.idle,
            server,
        }
    }
}

fn refused(server: &'static str) -> ::metrics::Counter {
    ::metrics::counter!(metrics::SERVER_CONNECTIONS_REFUSED_TOTAL, "server" => server)
}

/// The error for a connection closed because every place was held by one that must keep it.
fn refuse(server: &'static str, what: &str) -> io::Error {
    refused(server).increment(1);
    io::Error::other(format!(
        "every {what} place of the {server} is busy; closing this connection"
    ))
}

type Accepted<S, T> = io::Result<(Counted<S>, Tracked<T>)>;

impl<A, S> Accept<TcpStream, S> for Limited<A>
where
    A: Accept<Watched, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Counted<A::Stream>;
    type Service = Tracked<A::Service>;
    type Future = Pin<Box<dyn Future<Output = Accepted<A::Stream, A::Service>> + Send>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let server = self.server;
        let handshake = Arc::new(Handshake::default());
        let shed = CancellationToken::new();
        let Ok(place) = self.handshakes.take(handshake.clone(), shed.clone()) else {
            self.tarpit.hold(stream);
            return Box::pin(std::future::ready(Err(refuse(server, "handshake"))));
        };
        let watched = Watched {
            inner: Some(stream),
            handshake,
            shed: shed.clone(),
            tarpit: self.tarpit.clone(),
        };
        let accepting = self.inner.accept(watched, service);
        let (connections, idle) = (self.connections.clone(), self.idle);
        Box::pin(async move {
            let accepted = tokio::select! {
                biased;
                accepted = accepting => accepted,
                () = shed.cancelled() => Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "shed in its TLS handshake for a newer connection",
                )),
            };
            drop(place);
            let (stream, service) = accepted.inspect_err(|e| {
                let ending = if shed.is_cancelled() {
                    Ending::ShedInHandshake
                } else {
                    Ending::of_handshake(e)
                };
                ending.counter(server).increment(1);
            })?;
            let activity = Arc::new(Activity::default());
            let Ok(place) = connections.take(activity.clone(), shed.clone()) else {
                shed.cancel();
                return Err(refuse(server, "open connection"));
            };
            let shed = Box::pin(place.shed().clone().cancelled_owned());
            Ok((
                Counted {
                    inner: stream,
                    place,
                    server,
                    shed,
                    ended_by_client: false,
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

/// How far a connection's TLS handshake has come, as its stream saw it.
#[derive(Debug)]
pub struct Handshake(AtomicU8);

impl Default for Handshake {
    fn default() -> Handshake {
        Handshake(AtomicU8::new(Handshake::UNREAD))
    }
}

impl Handshake {
    /// Not read yet: its task has not run since the accept, so nothing says it is stalled,
    /// and it keeps its place (a flood's newcomers would otherwise shed the freshest, a real
    /// client's, before it is ever read).
    const UNREAD: u8 = 0;
    /// Read, and nothing received yet.
    const SILENT: u8 = 1;
    /// Bytes received (a ClientHello, whole or in part), nothing sent back.
    const HELLO: u8 = 2;
    /// Gangplank answered: the handshake waits for the client's last flight.
    const ANSWERED: u8 = 3;

    fn reached(&self, step: u8) {
        if self.0.load(Ordering::Relaxed) < step {
            self.0.fetch_max(step, Ordering::Relaxed);
        }
    }
}

impl Progress for Handshake {
    /// Silent, then mid-hello, then answered; unread keeps the place.
    fn tier(&self) -> Option<u8> {
        self.0
            .load(Ordering::Relaxed)
            .checked_sub(Handshake::SILENT)
    }
}

/// A connection's TCP stream, telling its [`Handshake`] what it saw, and given to the tarpit
/// when dropped after its connection lost its place (or found none once open).
pub struct Watched {
    inner: Option<TcpStream>,
    handshake: Arc<Handshake>,
    shed: CancellationToken,
    tarpit: Arc<Tarpit>,
}

impl Watched {
    fn stream(&mut self) -> Pin<&mut TcpStream> {
        Pin::new(
            self.inner
                .as_mut()
                .expect("the stream is taken only when dropped"),
        )
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if self.shed.is_cancelled()
            && let Some(stream) = self.inner.take()
        {
            self.tarpit.hold(stream);
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = self.stream().poll_read(cx, buf);
        self.handshake.reached(if buf.filled().len() > before {
            Handshake::HELLO
        } else {
            Handshake::SILENT
        });
        read
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = self.stream().poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.handshake.reached(Handshake::ANSWERED);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = self.stream().poll_write_vectored(cx, bufs);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.handshake.reached(Handshake::ANSWERED);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(|s| s.is_write_vectored())
    }
}

/// The requests of one open connection: how many are in flight, how many times that number
/// changed (so that its stream restarts the idle deadline after each request), and whether
/// bytes of a request have arrived since the last answer.
#[derive(Debug, Default)]
struct Activity {
    in_flight: AtomicU64,
    changes: AtomicU64,
    mid_request: AtomicBool,
}

impl Activity {
    fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.changes.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }
}

impl Progress for Activity {
    /// Silent since its handshake, then idle after its answers, then a request arriving; a
    /// request in flight keeps the place.
    fn tier(&self) -> Option<u8> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            None
        } else if self.mid_request.load(Ordering::SeqCst) {
            Some(2)
        } else if self.changes.load(Ordering::SeqCst) == 0 {
            Some(0)
        } else {
            Some(1)
        }
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
    /// one allowed ([`crate::runtime::tls::WrongClient`]).
    WrongClient,
    /// A newer connection took its handshake place ([`places`]).
    ShedInHandshake,
    /// A newer connection took its open place while it had no request in flight.
    ShedOpen,
}

impl Ending {
    const ALL: [Ending; 8] = [
        Ending::Client,
        Ending::BetweenRequests,
        Ending::MidRequest,
        Ending::HandshakeTimeout,
        Ending::HandshakeFailed,
        Ending::WrongClient,
        Ending::ShedInHandshake,
        Ending::ShedOpen,
    ];

    fn label(self) -> &'static str {
        match self {
            Ending::Client => "client",
            Ending::BetweenRequests => "server_between_requests",
            Ending::MidRequest => "server_mid_request",
            Ending::HandshakeTimeout => "handshake_timeout",
            Ending::HandshakeFailed => "handshake_failed",
            Ending::WrongClient => "wrong_client",
            Ending::ShedInHandshake => "shed_in_handshake",
            Ending::ShedOpen => "shed_open",
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
            && other.0.is::<crate::runtime::tls::WrongClient>()
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

/// A connection's stream that holds its place among the open ones while it lives (and ends
/// when that place is shed), and tells how it ended when it is dropped.
pub struct Counted<S> {
    inner: S,
    place: Place,
    server: &'static str,
    /// Ready once a newer connection took the place.
    shed: Pin<Box<WaitForCancellationFutureOwned>>,
    /// A read saw the end of the stream or an error.
    ended_by_client: bool,
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
        let ending = if self.place.shed().is_cancelled() {
            Ending::ShedOpen
        } else if self.ended_by_client {
            Ending::Client
        } else if self.activity.mid_request.load(Ordering::SeqCst) {
            Ending::MidRequest
        } else {
            Ending::BetweenRequests
        };
        ending.counter(self.server).increment(1);
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
            Poll::Ready(Ok(())) => self.activity.mid_request.store(true, Ordering::SeqCst),
            Poll::Ready(Err(_)) => self.ended_by_client = true,
            Poll::Pending if self.shed.as_mut().poll(cx).is_ready() => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "shed with no request in flight for a newer connection",
                )));
            }
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
            self.activity.mid_request.store(false, Ordering::SeqCst);
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
            self.activity.mid_request.store(false, Ordering::SeqCst);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
