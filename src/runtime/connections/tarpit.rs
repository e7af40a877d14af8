//! Where connections that lost their place, or found none, wait out the handshake deadline:
//! held open, never read or written, then closed. A flood that opens a connection again as
//! soon as one is closed would otherwise turn every refusal and every place given up into
//! another connection, and the next one into another, as fast as its CPU goes; held, its
//! connections come back once a deadline. Bounded by [`room`], from the process's file
//! descriptor limit: beyond, closed at once. The acceptor ([`super::Limited`]) and its
//! streams put connections here; nothing takes them out.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Connections each server holds unread at most, whatever the file descriptor limit: with
/// their sockets' kernel memory (a few KiB each), tens of MiB.
pub const MAX_HELD: usize = 16_384;

/// Connections each server holds unread at least, even under a low file descriptor limit.
const MIN_HELD: usize = 256;

/// Descriptors kept for everything but the tarpits: the places of the two TLS ports, the
/// API server's watches, files, and the metrics port.
const RESERVED: u64 = 2 * (super::MAX_CONNECTIONS + super::MAX_HANDSHAKES) as u64 + 1024;

/// The servers that have a tarpit (extender, webhooks, metrics).
const SERVERS: u64 = 3;

/// How many connections each server's tarpit holds: its share of the file descriptor limit,
/// raised first to the hard limit (as Go's runtime does for every Go program), between
/// [`MIN_HELD`] and [`MAX_HELD`]. A flood of more connections than this reconnects as fast
/// as it can past it. The limit is read and raised once per process, however many servers ask.
pub fn room() -> usize {
    static ROOM: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *ROOM.get_or_init(raised_limit_share)
}

fn raised_limit_share() -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            limit.current = limit.maximum;
        }
    }
    share(limit.current)
}

/// A tarpit's share of a file descriptor limit (`None`: unlimited).
fn share(limit: Option<u64>) -> usize {
    let spare = limit.map_or(u64::MAX, |l| l.saturating_sub(RESERVED)) / SERVERS;
    usize::try_from(spare).map_or(MAX_HELD, |s| s.clamp(MIN_HELD, MAX_HELD))
}

pub struct Tarpit {
    room: Arc<Semaphore>,
    hold: Duration,
    gauge: ::metrics::Gauge,
}

impl Tarpit {
    pub fn new(capacity: usize, hold: Duration, gauge: ::metrics::Gauge) -> Arc<Tarpit> {
        gauge.set(0.0);
        Arc::new(Tarpit {
            room: Arc::new(Semaphore::new(capacity)),
            hold,
            gauge,
        })
    }

    /// Holds `stream` unread for the hold time, or closes it now when the tarpit is full (or
    /// the runtime is going away).
    pub fn hold(&self, stream: TcpStream) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Ok(place) = self.room.clone().try_acquire_owned() else {
            return;
        };
        let (hold, gauge) = (self.hold, self.gauge.clone());
        gauge.increment(1.0);
        runtime.spawn(async move {
            tokio::time::sleep(hold).await;
            drop(stream);
            drop(place);
            gauge.decrement(1.0);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (client.unwrap(), accepted.unwrap().0)
    }

    async fn closed(mut client: TcpStream) -> bool {
        use tokio::io::AsyncReadExt;
        let mut byte = [0u8; 1];
        matches!(client.read(&mut byte).await, Ok(0) | Err(_))
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_connection_stays_open_until_the_hold_time_then_closes() {
        let tarpit = Tarpit::new(1, Duration::from_secs(10), ::metrics::Gauge::noop());
        let (mut client, accepted) = pair().await;
        tarpit.hold(accepted);
        let mut byte = [0u8; 1];
        let early = tokio::time::timeout(Duration::from_secs(9), {
            use tokio::io::AsyncReadExt;
            client.read(&mut byte)
        })
        .await;
        assert!(early.is_err(), "nothing happens for the hold time");
        assert!(closed(client).await, "then it is closed");
    }

    #[test]
    fn each_tarpit_holds_its_share_of_the_descriptor_limit_within_bounds() {
        assert_eq!(share(Some(1_024)), MIN_HELD, "a low limit still holds some");
        assert_eq!(share(Some(20_000)), (20_000 - RESERVED as usize) / 3);
        assert_eq!(
            share(Some(1_048_576)),
            MAX_HELD,
            "a container's usual limit"
        );
        assert_eq!(share(None), MAX_HELD);
    }

    #[tokio::test]
    async fn beyond_its_capacity_a_connection_is_closed_at_once() {
        let tarpit = Tarpit::new(1, Duration::from_secs(3600), ::metrics::Gauge::noop());
        let (_first_client, first) = pair().await;
        let (second_client, second) = pair().await;
        tarpit.hold(first);
        tarpit.hold(second);
        assert!(closed(second_client).await);
    }
}
