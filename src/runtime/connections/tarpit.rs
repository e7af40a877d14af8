//! Where connections that lost their place, or found none, wait out the handshake deadline:
//! held open, never read or written, then closed. A flood that opens a connection again as
//! soon as one is closed would otherwise turn every refusal and every place given up into
//! another connection, and the next one into another, as fast as its CPU goes; held, its
//! connections come back once a deadline. Bounded: beyond [`MAX_HELD`], closed at once. The
//! acceptor ([`super::Limited`]) and its streams put connections here; nothing takes them out.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Connections each server holds unread at once.
pub const MAX_HELD: usize = 2048;

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
