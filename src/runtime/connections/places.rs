//! The places a server has for connections in one stage (their TLS handshake, or open), and
//! which connection gives its place up when a new one comes and none is free: one from a
//! source address that holds more places than the newcomer's, the one that has come least
//! far, from the source holding the most, the oldest first. A newcomer from an address that
//! holds fewer places than another so always gets in, and a flood of connections that send
//! nothing, stop mid-handshake or never make a request gives its places up to the few
//! connections of the scheduler or the API server; a newcomer from the address that already
//! holds the most (the flood's own) is refused instead of shedding one of its kind, so a flood
//! cannot churn through the places. docs/decisions/connection-places.md says why.
//!
//! Only [`super::Limited`]'s accept takes places and sheds; a [`Place`] gives its own back
//! when dropped.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// How far a holder of a place has come: `None` while it must keep its place (a request in
/// flight), else a tier, the lowest shed first.
pub trait Progress: Send + Sync {
    fn tier(&self) -> Option<u8>;
}

struct Holder {
    source: IpAddr,
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
    per_source: HashMap<IpAddr, usize>,
}

impl Holders {
    fn remove(&mut self, id: u64) -> Option<Holder> {
        let holder = self.by_id.remove(&id)?;
        if let Some(count) = self.per_source.get_mut(&holder.source) {
            *count -= 1;
            if *count == 0 {
                self.per_source.remove(&holder.source);
            }
        }
        Some(holder)
    }
}

/// No place could be given: every holder must keep its own, or comes from an address that
/// holds no more places than the newcomer's.
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

    /// A place for a connection from `source`, shedding one holder if none is free; `shed` is
    /// cancelled if this place is shed in turn.
    pub fn take(
        self: &Arc<Self>,
        source: IpAddr,
        progress: Arc<dyn Progress>,
        shed: CancellationToken,
    ) -> Result<Place, Full> {
        let mut holders = self.holders.lock().unwrap_or_else(|e| e.into_inner());
        if holders.by_id.len() >= self.capacity {
            let mine = holders.per_source.get(&source).copied().unwrap_or(0);
            let candidates = holders.by_id.iter().map(|(id, h)| Candidate {
                id: *id,
                tier: h.progress.tier(),
                places_of_source: holders.per_source[&h.source],
                since: h.since,
            });
            let victim = victim(candidates, mine).ok_or(Full)?;
            if let Some(shed) = holders.remove(victim) {
                shed.shed.cancel();
            }
        }
        let id = holders.next;
        holders.next += 1;
        holders.by_id.insert(
            id,
            Holder {
                source,
                since: Instant::now(),
                progress,
                shed: shed.clone(),
            },
        );
        *holders.per_source.entry(source).or_default() += 1;
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
    /// Places held by its source address.
    pub places_of_source: usize,
    pub since: Instant,
}

/// The holder to shed for a newcomer whose address holds `newcomers_places`: among those
/// that may give their place up and whose address holds more, the lowest tier, then the
/// address holding the most, then the oldest; none when there is no such holder.
pub fn victim(candidates: impl Iterator<Item = Candidate>, newcomers_places: usize) -> Option<u64> {
    candidates
        .filter(|c| c.places_of_source > newcomers_places)
        .filter_map(|c| {
            let tier = c.tier?;
            Some((tier, std::cmp::Reverse(c.places_of_source), c.since, c.id))
        })
        .min()
        .map(|(_, _, _, id)| id)
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

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn places(capacity: usize) -> Arc<Places> {
        Places::new(capacity, ::metrics::Gauge::noop())
    }

    fn take(places: &Arc<Places>, from: u8, tier: Option<u8>) -> Result<Place, Full> {
        places.take(ip(from), Arc::new(Fixed(tier)), CancellationToken::new())
    }

    #[test]
    fn a_newcomer_from_another_address_sheds_the_flood_connection_that_has_come_least_far() {
        let places = places(2);
        let answered = take(&places, 2, Some(2)).unwrap();
        let silent = take(&places, 2, Some(0)).unwrap();
        let newcomer = take(&places, 1, Some(0)).unwrap();
        assert!(silent.shed().is_cancelled());
        assert!(!answered.shed().is_cancelled());
        assert!(!newcomer.shed().is_cancelled());
    }

    #[test]
    fn the_address_holding_the_most_places_gives_one_up_first_even_if_another_is_older() {
        let places = places(4);
        let lone = take(&places, 3, Some(0)).unwrap();
        let flood: Vec<Place> = (0..3).map(|_| take(&places, 2, Some(0)).unwrap()).collect();
        let _newcomer = take(&places, 1, Some(0)).unwrap();
        assert!(
            !lone.shed().is_cancelled(),
            "the older but lone holder stays"
        );
        assert!(flood[0].shed().is_cancelled(), "the flood's oldest goes");
        assert_eq!(flood.iter().filter(|p| p.shed().is_cancelled()).count(), 1);
    }

    #[test]
    fn a_newcomer_from_the_address_holding_the_most_is_refused_and_sheds_none_of_its_kind() {
        let places = places(3);
        let flood: Vec<Place> = (0..3).map(|_| take(&places, 2, Some(0)).unwrap()).collect();
        assert_eq!(take(&places, 2, Some(0)).err(), Some(Full));
        assert!(flood.iter().all(|p| !p.shed().is_cancelled()));
    }

    #[test]
    fn among_one_addresss_equals_the_oldest_goes() {
        let earlier = Instant::now();
        let later = earlier + Duration::from_millis(1);
        let candidates = [
            Candidate {
                id: 7,
                tier: Some(1),
                places_of_source: 2,
                since: later,
            },
            Candidate {
                id: 8,
                tier: Some(1),
                places_of_source: 2,
                since: earlier,
            },
        ];
        assert_eq!(victim(candidates.into_iter(), 0), Some(8));
    }

    #[test]
    fn a_holder_that_must_keep_its_place_is_never_shed_and_a_full_stage_refuses() {
        let places = places(1);
        let busy = take(&places, 2, None).unwrap();
        assert_eq!(take(&places, 1, Some(0)).err(), Some(Full));
        assert!(!busy.shed().is_cancelled());
    }

    #[test]
    fn a_dropped_place_is_free_again_and_no_longer_counts_for_its_address() {
        let places = places(1);
        drop(take(&places, 2, None).unwrap());
        let second = take(&places, 2, Some(0)).unwrap();
        let third = take(&places, 1, Some(0)).unwrap();
        assert!(
            second.shed().is_cancelled(),
            "its address holds one place, the newcomer's none"
        );
        assert!(!third.shed().is_cancelled());
    }
}
