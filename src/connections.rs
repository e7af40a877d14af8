//! A bound on the connections a server holds open at once ([`Limited`], an `axum_server`
//! acceptor around the TLS or plain one): a connection beyond the bound is closed as soon as it
//! is accepted, before its TLS handshake, and counted
//! (`gangplank_server_connections_refused_total`), so a flood of idle or slow clients cannot
//! take every file descriptor of the process or the memory of their buffers. The open ones are
//! a gauge (`gangplank_server_connections`). The scheduler and the API server each keep a few
//! connections to Gangplank, far below the bound.

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
            let (stream, service) = accepting.await?;
            Ok((
                Counted {
                    inner: stream,
                    _held: counted,
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

/// A connection's stream that holds its place among the open ones while it lives.
pub struct Counted<S> {
    inner: S,
    _held: Held,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
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
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
