//! The places a server has for connections in one stage (their TLS handshake, or open), and
//! which connection gives its place up when a new one comes and none is free: the one that has
//! come least far, from the source address that holds the most places, the oldest first. A
//! new connection so always gets a place while any holder can be shed, and a flood of
//! connections that send nothing, stop mid-handshake or never make a request sheds itself
//! before the few connections of the scheduler or the API server, which are young and busy.
//! docs/decisions/connection-places.md says why this and not a refusal at accept.
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
}

/// Every place was held by a connection that must keep it.
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

    /// A place for a connection from `source`, shedding one holder if none is free.
    pub fn take(
        self: &Arc<Self>,
        source: IpAddr,
        progress: Arc<dyn Progress>,
    ) -> Result<Place, Full> {
        let mut holders = self.holders.lock().unwrap_or_else(|e| e.into_inner());
        if holders.by_id.len() >= self.capacity {
            let candidates = holders
                .by_id
                .iter()
                .map(|(id, h)| (*id, h.source, h.since, h.progress.tier()));
            let victim = victim(candidates).ok_or(Full)?;
            if let Some(shed) = holders.by_id.remove(&victim) {
                shed.shed.cancel();
            }
        }
        let id = holders.next;
        holders.next += 1;
        let shed = CancellationToken::new();
        holders.by_id.insert(
            id,
            Holder {
                source,
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

/// The holder to shed among `(id, source, since, tier)`: the lowest tier, then the source
/// holding the most places, then the oldest; none when every holder must keep its place.
pub fn victim(
    holders: impl Iterator<Item = (u64, IpAddr, Instant, Option<u8>)> + Clone,
) -> Option<u64> {
    let mut per_source: HashMap<IpAddr, usize> = HashMap::new();
    for (_, source, _, _) in holders.clone() {
        *per_source.entry(source).or_default() += 1;
    }
    holders
        .filter_map(|(id, source, since, tier)| {
            tier.map(|tier| (tier, std::cmp::Reverse(per_source[&source]), since, id))
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

    #[test]
    fn a_new_connection_sheds_the_one_that_has_come_least_far() {
        let places = places(2);
        let answered = places.take(ip(1), Arc::new(Fixed(Some(2)))).unwrap();
        let silent = places.take(ip(1), Arc::new(Fixed(Some(0)))).unwrap();
        let newcomer = places.take(ip(1), Arc::new(Fixed(Some(0)))).unwrap();
        assert!(silent.shed().is_cancelled());
        assert!(!answered.shed().is_cancelled());
        assert!(!newcomer.shed().is_cancelled());
    }

    #[test]
    fn among_equals_the_source_holding_the_most_places_gives_one_up_first() {
        let places = places(4);
        let scheduler = places.take(ip(1), Arc::new(Fixed(Some(0)))).unwrap();
        let flood: Vec<Place> = (0..3)
            .map(|_| places.take(ip(2), Arc::new(Fixed(Some(0)))).unwrap())
            .collect();
        let _newcomer = places.take(ip(3), Arc::new(Fixed(Some(0)))).unwrap();
        assert!(
            !scheduler.shed().is_cancelled(),
            "the older but lone holder stays"
        );
        assert_eq!(flood.iter().filter(|p| p.shed().is_cancelled()).count(), 1);
        assert!(flood[0].shed().is_cancelled(), "the flood's oldest goes");
    }

    #[test]
    fn among_one_sources_equals_the_oldest_goes() {
        let earlier = Instant::now();
        let later = earlier + Duration::from_millis(1);
        let holders = [(7, ip(1), later, Some(1)), (8, ip(1), earlier, Some(1))];
        assert_eq!(victim(holders.into_iter()), Some(8));
    }

    #[test]
    fn a_holder_that_must_keep_its_place_is_never_shed_and_a_full_stage_refuses() {
        let places = places(1);
        let busy = places.take(ip(1), Arc::new(Fixed(None))).unwrap();
        assert_eq!(
            places.take(ip(2), Arc::new(Fixed(Some(0)))).err(),
            Some(Full)
        );
        assert!(!busy.shed().is_cancelled());
    }

    #[test]
    fn a_dropped_place_is_free_again() {
        let places = places(1);
        let first = places.take(ip(1), Arc::new(Fixed(None))).unwrap();
        drop(first);
        let second = places.take(ip(1), Arc::new(Fixed(None))).unwrap();
        assert!(!second.shed().is_cancelled());
    }
}
