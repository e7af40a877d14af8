//! Serving one port: [`serve`] runs a router on an address until shutdown, over HTTPS (its
//! certificates reloaded when the files change) or plain HTTP, within the port's
//! [`Bounds`] (connections, handshakes, bodies, header sizes, HTTP/2 pings). `gangplank serve`
//! (`crate::server`) serves its three ports through it.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use tokio_util::sync::CancellationToken;

use super::connections::{Bounds, Limited, body};
use super::tls;

/// How long open extender requests may run once a port stops ([`DRAIN`] after the shutdown
/// signal).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// How long a port goes on serving after the shutdown signal while clients still hold
/// connections to it, each HTTP/1 answer saying `Connection: close`. A client that keeps its
/// connections alive (the API server calling the webhooks) learns from the answer to connect
/// again, wherever its route now leads, instead of writing its next request onto a connection
/// the port closes at that moment, which it sees as an EOF: a failed call. What is still
/// idle after it is closed, and what is in flight gets [`SHUTDOWN_GRACE`].
pub const DRAIN: Duration = Duration::from_secs(2);

/// How often [`drain`] looks whether every connection is gone.
const DRAIN_CHECK: Duration = Duration::from_millis(50);

/// What a connection's HTTP/1 read buffer may grow to, so a request's headers may be at most
/// this large (hyper answers 431 beyond). Those of the scheduler, the API server and
/// Prometheus are a few hundred bytes; hyper's default, 400 KiB, would let a flood of
/// connections with large headers hold 400 MiB.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// How often an HTTP/2 connection with a request in flight (a held bind) is pinged, and how
/// long the answer may take before the connection counts as dead and is closed.
pub const HTTP2_PING: (Duration, Duration) = (Duration::from_secs(20), Duration::from_secs(10));

/// Serves `router` on `addr` until shutdown: over HTTPS from `tls` (reloaded when the files
/// change, client certificates demanded when it names a client CA), else plain HTTP, within
/// `bounds`. `name` labels the logs and the connection metrics; `handle` tells when the server
/// listens, and where. After the shutdown signal it drains ([`DRAIN`]), then stops.
pub async fn serve(
    name: &'static str,
    addr: SocketAddr,
    router: Router,
    tls: Option<tls::Files>,
    bounds: Bounds,
    handle: axum_server::Handle<SocketAddr>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    tokio::spawn({
        let (handle, shutdown) = (handle.clone(), shutdown.clone());
        async move {
            shutdown.cancelled().await;
            drain(&handle).await;
            handle.graceful_shutdown(Some(SHUTDOWN_GRACE));
        }
    });
    let draining = shutdown.clone();
    let service = router
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                closing_when(draining.clone(), request, next)
            },
        ))
        .layer(axum::middleware::map_request(
            move |request: axum::extract::Request| async move {
                body::with_deadline(request, bounds.body)
            },
        ))
        .into_make_service();
    let mut server = axum_server::bind(addr).handle(handle);
    if !bounds.http2 {
        server = server.http1_only();
    }
    let builder = server.http_builder();
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_buf_size(MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(HTTP2_PING.0)
        .keep_alive_timeout(HTTP2_PING.1);
    let limited = |acceptor| Limited::new(acceptor, bounds, name);
    match tls {
        Some(files) => {
            let config = tls::load(&files, bounds.http2).await?;
            let clients = if files.client_ca.is_some() {
                "client certificate required"
            } else {
                "any client"
            };
            tokio::spawn(tls::reload_on_change(
                config.clone(),
                files,
                bounds.http2,
                tls::RELOAD_INTERVAL,
                shutdown,
            ));
            tracing::info!(%addr, clients, "{name} listening (https)");
            let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(config)
                .handshake_timeout(bounds.handshake);
            server.acceptor(limited(acceptor)).serve(service).await
        }
        None => {
            tracing::info!(%addr, "{name} listening (http)");
            let acceptor = axum_server::accept::DefaultAcceptor::new();
            let limited = Limited::new(acceptor, bounds, name);
            server.acceptor(limited).serve(service).await
        }
    }
    .with_context(|| format!("failed to serve the {name} on {addr}"))
}

/// Waits until no connection is open on `handle`'s server, or [`DRAIN`] has passed.
async fn drain(handle: &axum_server::Handle<SocketAddr>) {
    let deadline = tokio::time::Instant::now() + DRAIN;
    while handle.connection_count() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(DRAIN_CHECK).await;
    }
}

/// Answers `request`, saying `Connection: close` on an HTTP/1 answer once `draining` is
/// cancelled, so that the client connects again for its next request.
async fn closing_when(
    draining: CancellationToken,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let http1 = request.version() < http::Version::HTTP_2;
    let mut response = next.run(request).await;
    if http1 && draining.is_cancelled() {
        response.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    response
}
