//! The places a server has for connections in one stage (their TLS handshake, or open), and
//! which connection gives its place up when a new one comes and none is free: the one that has
//! come least far, the oldest first, whatever its address. A real client goes through each
//! stage in milliseconds, so the holders a newcomer sheds are the stalled ones: a flood of
//! connections that send nothing, stop mid-hello or never make a request gives its places up
//! to the scheduler's and the API server's, from however many addresses it comes. A holder
//! that must keep its place (nothing read yet, or a request in flight) is never shed; when
//! every holder must, the newcomer is refused. docs/decisions/connection-places.md says why.
//!
//! Only [`super::Limited`]'s accept takes places and sheds; a [`Place`] gives its own back
//! when dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// How far a holder of a place has come: `None` while it must keep its place, else a tier,
/// the lowest shed first.
pub trait Progress: Send + Sync {
    fn tier(&self) -> Option<u8>;
}

struct Holder {
    since: Instant,
    progress: Arc<dyn Progress>,
    shed: CancellationToken,
}

/// One stage's places, shared by the server's connections.
pub struct Places {
    capacity: usize,
    holders: Mutex<Holders>,
    gauge: ::metrics::Gauge,
}

#[derive(Default)]
struct Holders {
    next: u64,
    by_id: HashMap<u64, Holder>,
}

/// No place could be given: every holder must keep its own.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

impl Places {
    /// `capacity` places, their count kept in `gauge`.
    pub fn new(capacity: usize, gauge: ::metrics::Gauge) -> Arc<Places> {
        gauge.set(0.0);
        Arc::new(Places {
            capacity,
            holders: Mutex::new(Holders::default()),
            gauge,
        })
    }

    /// A place for a newcomer, shedding one holder if none is free; `shed` is cancelled if
    /// this place is shed in turn.
    pub fn take(
        self: &Arc<Self>,
        progress: Arc<dyn Progress>,
        shed: CancellationToken,
    ) -> Result<Place, Full> {
        let mut holders = self.holders.lock().unwrap_or_else(|e| e.into_inner());
        if holders.by_id.len() >= self.capacity {
            let candidates = holders.by_id.iter().map(|(id, h)| Candidate {
                id: *id,
                tier: h.progress.tier(),
                since: h.since,
            });
            let victim = victim(candidates).ok_or(Full)?;
            if let Some(shed) = holders.by_id.remove(&victim) {
                shed.shed.cancel();
            }
        }
        let id = holders.next;
        holders.next += 1;
        holders.by_id.insert(
            id,
            Holder {
                since: Instant::now(),
                progress,
                shed: shed.clone(),
            },
        );
        self.gauge.set(holders.by_id.len() as f64);
        Ok(Place {
            places: self.clone(),
            id,
            shed,
        })
    }
}

/// A holder as [`victim`] weighs it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    pub id: u64,
    /// `None`: it must keep its place.
    pub tier: Option<u8>,
    pub since: Instant,
}

/// The holder to shed for a newcomer: among those that may give their place up, the lowest
/// tier, then the oldest; none when every holder must keep its place.
pub fn victim(candidates: impl Iterator<Item = Candidate>) -> Option<u64> {
    candidates
        .filter_map(|c| Some((c.tier?, c.since, c.id)))
        .min()
        .map(|(_, _, id)| id)
}

/// A connection's place, given back when dropped (unless it was shed, which took it back).
pub struct Place {
    places: Arc<Places>,
    id: u64,
    shed: CancellationToken,
}

impl Place {
    /// Cancelled when another connection took this place.
    pub fn shed(&self) -> &CancellationToken {
        &self.shed
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut holders = self
            .places
            .holders
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        holders.by_id.remove(&self.id);
        self.places.gauge.set(holders.by_id.len() as f64);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    struct Fixed(Option<u8>);

    impl Progress for Fixed {
        fn tier(&self) -> Option<u8> {
            self.0
        }
    }

    fn places(capacity: usize) -> Arc<Places> {
        Places::new(capacity, ::metrics::Gauge::noop())
    }

    fn take(places: &Arc<Places>, tier: Option<u8>) -> Result<Place, Full> {
        places.take(Arc::new(Fixed(tier)), CancellationToken::new())
    }

    #[test]
    fn a_newcomer_sheds_the_holder_that_has_come_least_far() {
        let places = places(2);
        let answered = take(&places, Some(2)).unwrap();
        let silent = take(&places, Some(0)).unwrap();
        let newcomer = take(&places, Some(0)).unwrap();
        assert!(silent.shed().is_cancelled());
        assert!(!answered.shed().is_cancelled());
        assert!(!newcomer.shed().is_cancelled());
    }

    #[test]
    fn among_holders_as_far_the_oldest_goes_and_the_newest_stays_longest() {
        let places = places(3);
        let held: Vec<Place> = (0..3).map(|_| take(&places, Some(1)).unwrap()).collect();
        let _newcomer = take(&places, Some(1)).unwrap();
        assert!(held[0].shed().is_cancelled(), "the oldest goes");
        let _next = take(&places, Some(1)).unwrap();
        assert!(held[1].shed().is_cancelled(), "then the next oldest");
        assert!(!held[2].shed().is_cancelled(), "the newest is still there");
    }

    #[test]
    fn a_flood_of_silent_newcomers_sheds_its_own_and_never_a_client_that_was_answered() {
        let places = places(128);
        let client = take(&places, Some(2)).unwrap();
        let flood: Vec<Place> = (0..10_000)
            .filter_map(|_| take(&places, Some(0)).ok())
            .collect();
        assert_eq!(
            flood.len(),
            10_000,
            "each flood newcomer sheds an older one of its kind"
        );
        assert!(!client.shed().is_cancelled());
    }

    #[test]
    fn the_oldest_of_the_lowest_tier_goes_first() {
        let earlier = Instant::now();
        let later = earlier + Duration::from_millis(1);
        let candidates = [
            Candidate {
                id: 6,
                tier: Some(2),
                since: earlier,
            },
            Candidate {
                id: 7,
                tier: Some(1),
                since: later,
            },
            Candidate {
                id: 8,
                tier: Some(1),
                since: earlier,
            },
        ];
        assert_eq!(victim(candidates.into_iter()), Some(8));
    }

    #[test]
    fn a_holder_that_must_keep_its_place_is_never_shed_and_a_full_stage_refuses() {
        let places = places(1);
        let busy = take(&places, None).unwrap();
        assert_eq!(take(&places, Some(0)).err(), Some(Full));
        assert!(!busy.shed().is_cancelled());
    }

    #[test]
    fn a_dropped_place_is_free_again() {
        let places = places(1);
        drop(take(&places, None).unwrap());
        let second = take(&places, Some(0)).unwrap();
        assert!(!second.shed().is_cancelled());
    }
}
