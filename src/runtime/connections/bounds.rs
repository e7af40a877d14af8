//! The limits of one port: how long its clients may take, and how many connections it holds.

use std::time::Duration;

use super::{MAX_CONNECTIONS, MAX_HANDSHAKES};

/// The limits of one port (`super::port::serve`): how long a client may take, so that connections
/// that send nothing, or trickle their headers or body, are closed instead of held; how many
/// may be in their handshake and open at once ([`super::Limited`]); and whether HTTP/2 is
/// offered. What a request may carry (its body's size, how many are decided at once) is the
/// router's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The TLS handshake.
    pub handshake: Duration,
    /// A connection with no request in flight: one that sends nothing, trickles its headers,
    /// or is a keep-alive connection left idle (clients open a new one). Counted from the
    /// connection's last answer, for HTTP/1 and HTTP/2 alike.
    pub idle: Duration,
    /// A request's whole body, from the moment its headers arrived.
    pub body: Duration,
    /// Connections open at once, counted once their handshake is done; beyond, the open one
    /// that has come least far with no request in flight is shed ([`super::places`]).
    pub connections: usize,
    /// Connections in their TLS handshake at once; beyond, the one that has come least far is
    /// shed.
    pub handshakes: usize,
    /// Whether HTTP/2 is offered (by ALPN, and by its preface on a plain port).
    pub http2: bool,
}

impl Bounds {
    /// The extender's port: far above what a scheduler on a working network needs (its
    /// requests arrive in milliseconds), far below "held forever". HTTP/2 stays offered, with
    /// the idle deadline and pings: a scheduler whose Go client negotiates it carries a gang's
    /// held binds on a few connections instead of one each.
    pub const EXTENDER: Bounds = Bounds {
        handshake: Duration::from_secs(10),
        idle: Duration::from_secs(30),
        body: Duration::from_secs(30),
        connections: MAX_CONNECTIONS,
        handshakes: MAX_HANDSHAKES,
        http2: true,
    };

    /// The webhooks' port: HTTP/1.1 only, as the API server calls webhooks over HTTP/1.1
    /// alone (since Kubernetes 1.16), and a body's deadline at the API server's default
    /// webhook timeout (10 s), after which nobody waits for the answer.
    pub const WEBHOOKS: Bounds = Bounds {
        body: Duration::from_secs(10),
        http2: false,
        ..Bounds::EXTENDER
    };

    /// The metrics and probes port: plain HTTP/1.1, for Prometheus and the kubelet, which
    /// keep a connection or two each.
    pub const METRICS: Bounds = Bounds {
        connections: 64,
        body: Duration::from_secs(10),
        http2: false,
        ..Bounds::EXTENDER
    };
}
