//! The ledger's owner: the only way to change what Gangplank decided itself (reservations,
//! claims, the head's reservation and the groups lent room in it, wait reasons, the door for
//! admissions on arrival, growths asked and given up; [`gangplank_core::model::Ledger`]). The extender, the claim-expiry
//! timer, the admission loop, the mutating pod webhook (only while this replica leads,
//! `crate::webhooks::LeaderArrivals`) and the start and end of a leader's term (which forget it
//! all, `crate::server`) call these methods; each runs one
//! decision of the core under the cache's write lock and keeps the claims gauge current. The
//! mirror's own writes end entries whose pod or group the API shows bound or gone
//! ([`super::mirror`]).

use std::time::Instant;

use gangplank_core::admit::{after_pass, on_arrival, plan};
use gangplank_core::claims::{self, FilterVerdict, Settings};
use gangplank_core::model::{GroupKey, GrowthFailed, Pod, PodGroup, Resources, State};
use gangplank_core::policy::constraints::Constraints;

use super::Cache;
use crate::metrics;

/// A cheap-to-clone handle on the ledger of one [`Cache`].
#[derive(Debug, Clone)]
pub struct LedgerWriter {
    cache: Cache,
}

impl LedgerWriter {
    pub(super) fn new(cache: Cache) -> LedgerWriter {
        LedgerWriter { cache }
    }

    /// Filter: the nodes among `candidates` where `pod` may go, claiming room for its gang
    /// ([`claims::filter`]).
    pub fn claim<'a, S: AsRef<str>>(
        &self,
        pod: &Pod,
        constraints: &Constraints,
        candidates: &'a [S],
        settings: &Settings,
        now: Instant,
    ) -> Result<FilterVerdict<'a>, claims::Error> {
        self.write(|s| claims::filter(s, pod, constraints, candidates, settings, now))
    }

    /// Bind: records that the scheduler assumed pod `uid` on `node` and whether its gang has
    /// quorum now ([`claims::reserve`]).
    pub fn reserve(
        &self,
        uid: &str,
        display: &str,
        node: &str,
        settings: &Settings,
        now: Instant,
    ) -> Result<Option<(PodGroup, claims::Release)>, claims::Error> {
        self.write(|s| claims::reserve(s, uid, display, node, settings, now))
    }

    /// Ends the reservations of `uids` (their binds failed or their callers went away).
    pub fn release(&self, uids: &[String]) {
        self.write(|s| {
            for uid in uids {
                s.ledger_mut().release(uid);
            }
        });
    }

    /// Gives up a gang that did not reach quorum: ends the reservations of its held `uids` and
    /// its claim; returns how many of its members are still placed.
    pub fn release_gang(&self, key: &GroupKey, uids: &[String]) -> usize {
        self.write(|s| {
            claims::release(s, key, uids);
            claims::placed_members(s, key, "")
        })
    }

    /// Drops the claims due at `now`, if any; takes the write lock only when one is.
    pub fn expire_due(&self, now: Instant) {
        if !self.cache.read(|s| claims::any_expired(s, now)) {
            return;
        }
        self.write(|s| claims::expire(s, now));
    }

    /// Records what an admission pass decided (`decision`) about the head's reservation,
    /// where the previous pass held `before` ([`after_pass::record`]).
    pub fn hold(&self, before: Option<&plan::Hold>, decision: &plan::Decision, now: Instant) {
        self.write(|s| {
            after_pass::record(s, before, decision, now);
            if tracing::enabled!(tracing::Level::DEBUG) {
                let claims: Vec<_> = s
                    .ledger()
                    .claims()
                    .iter()
                    .map(|(k, c)| (k.to_string(), c.reservation(), c.per_node()))
                    .collect();
                tracing::debug!(?claims, "claims after the pass");
            }
        });
    }

    /// Records the growths a pass asked for at `now` ([`gangplank_core::model::LedgerMut::note_growth_asked`]).
    pub fn growth_asked(&self, asked: &[plan::GrowthAsk], now: i64) {
        self.write(|s| {
            s.ledger_mut()
                .note_growth_asked(asked.iter().map(|a| &a.group), now)
        });
    }

    /// Records that the API server refused a stand-in of `group` ([`gangplank_core::model::LedgerMut::note_stand_in_refused`]).
    pub fn stand_in_refused(&self, group: &GroupKey, why: String) {
        self.write(|s| s.ledger_mut().note_stand_in_refused(group, why));
    }

    /// Records that the growth of the gang `group` was given up ([`gangplank_core::model::LedgerMut::note_growth_failed`]).
    pub fn growth_failed(&self, group: &GroupKey, record: GrowthFailed) {
        self.write(|s| s.ledger_mut().note_growth_failed(group, record));
    }

    /// Forgets every claim, reservation and admission on arrival ([`gangplank_core::model::LedgerMut::forget`]).
    pub fn forget(&self) {
        self.write(|s| s.ledger_mut().forget());
    }

    /// Whether a new member of `group` asking `requests` is created ungated, its gang admitted
    /// on arrival (the mutating webhook; [`on_arrival::admit`]).
    pub fn admit_on_arrival(
        &self,
        group: &GroupKey,
        name: &str,
        requests: &Resources,
        now: Instant,
    ) -> bool {
        self.write(|s| on_arrival::admit(s, group, name, requests, now, crate::clock::unix_now()))
    }

    fn write<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let (result, claims) = self.cache.write(|s| {
            let result = f(s);
            (result, s.ledger().claims().len())
        });
        ::metrics::gauge!(metrics::GANG_CLAIMS).set(claims as f64);
        result
    }
}
