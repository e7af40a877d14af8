//! A bound on the connections a server holds open at once ([`Limited`], an `axum_server`
//! acceptor around the TLS or plain one): a connection beyond the bound is closed as soon as it
//! is accepted, before its TLS handshake, and counted
//! (`gangplank_server_connections_refused_total`), so a flood of idle or slow clients cannot
//! take every file descriptor of the process or the memory of their buffers. The open ones are
//! a gauge (`gangplank_server_connections`), and each closed one is counted by how it ended
//! ([`Ending`], `gangplank_server_connections_closed_total`), which is how an operator sees the
//! handshake and header deadlines at work, or a scheduler without the right certificate. The
//! scheduler and the API server each keep a few connections to Gangplank, far below the bound.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics;

/// Connections each server holds open at once.
pub const MAX_CONNECTIONS: usize = 1024;

/// An acceptor that holds at most `max` connections of the server `server` open at once.
#[derive(Clone)]
pub struct Limited<A> {
    inner: A,
    permits: Arc<Semaphore>,
    server: &'static str,
}

impl<A> Limited<A> {
    pub fn new(inner: A, max: usize, server: &'static str) -> Limited<A> {
        ::metrics::gauge!(metrics::SERVER_CONNECTIONS, "server" => server).set(0.0);
        ::metrics::counter!(metrics::SERVER_CONNECTIONS_REFUSED_TOTAL, "server" => server)
            .absolute(0);
        for ending in Ending::ALL {
            ending.counter(server).absolute(0);
        }
        Limited {
            inner,
            permits: Arc::new(Semaphore::new(max)),
            server,
        }
    }
}

type Accepted<S, T> = io::Result<(Counted<S>, T)>;

impl<A, I, S> Accept<I, S> for Limited<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Counted<A::Stream>;
    type Service = A::Service;
    type Future = Pin<Box<dyn Future<Output = Accepted<A::Stream, A::Service>> + Send>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let server = self.server;
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            ::metrics::counter!(metrics::SERVER_CONNECTIONS_REFUSED_TOTAL, "server" => server)
                .increment(1);
            drop(stream);
            return Box::pin(std::future::ready(Err(io::Error::other(format!(
                "the {server} holds its most connections open; closing this one"
            )))));
        };
        ::metrics::gauge!(metrics::SERVER_CONNECTIONS, "server" => server).increment(1.0);
        let counted = Held {
            _permit: permit,
            server,
        };
        let accepting = self.inner.accept(stream, service);
        Box::pin(async move {
            let (stream, service) = accepting.await.inspect_err(|e| {
                Ending::of_handshake(e).counter(server).increment(1);
            })?;
            Ok((
                Counted {
                    inner: stream,
                    held: counted,
                    ended_by_client: false,
                    mid_request: false,
                },
                service,
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

/// How a connection ended, as `gangplank_server_connections_closed_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The client closed it, or it broke.
    Client,
    /// Gangplank closed it with nothing of a request unread: a keep-alive connection, or one
    /// that never sent a request, idle past the header deadline; after the answer to a body
    /// that missed its deadline; at shutdown.
    BetweenRequests,
    /// Gangplank closed it while a request was arriving or unanswered: headers trickled past
    /// their deadline, mostly.
    MidRequest,
    /// The TLS handshake did not finish within its deadline.
    HandshakeTimeout,
    /// The TLS handshake failed: no client certificate, or one the client CA did not sign, or
    /// not TLS at all.
    HandshakeFailed,
}

impl Ending {
    const ALL: [Ending; 5] = [
        Ending::Client,
        Ending::BetweenRequests,
        Ending::MidRequest,
        Ending::HandshakeTimeout,
        Ending::HandshakeFailed,
    ];

    fn label(self) -> &'static str {
        match self {
            Ending::Client => "client",
            Ending::BetweenRequests => "server_between_requests",
            Ending::MidRequest => "server_mid_request",
            Ending::HandshakeTimeout => "handshake_timeout",
            Ending::HandshakeFailed => "handshake_failed",
        }
    }

    fn of_handshake(error: &io::Error) -> Ending {
        if error.kind() == io::ErrorKind::TimedOut {
            Ending::HandshakeTimeout
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
