//! Deadlines: a claim lasts while some member is filtered or reserved within the gang's
//! schedule timeout (capped by [`Settings::max_hold`](super::Settings::max_hold)); past it,
//! [`expire`] drops the claim and frees its room. The filter calls it on its way, and the
//! extender's timer in a quiet cluster.

use std::time::Instant;

use crate::model::{GroupKey, State};

/// Whether some claim's deadline has passed at `now`: [`expire`] would change something.
pub fn any_expired(state: &State, now: Instant) -> bool {
    state.ledger().claims().values().any(|c| c.expired(now))
}

/// Drops every claim whose deadline has passed at `now` (no member placed within the gang's
/// timeout, or a head's reservation that outlived its own); returns how many. The filter calls
/// it on its way, and a timer calls it in a quiet cluster.
pub fn expire(state: &mut State, now: Instant) -> usize {
    let expired: Vec<GroupKey> = state
        .ledger()
        .claims()
        .iter()
        .filter(|(_, c)| c.expired(now))
        .map(|(k, _)| k.clone())
        .collect();
    for key in &expired {
        tracing::info!(group = %key, "gang claim expired: no member placed within its timeout");
        state.ledger_mut().drop_claim(key);
    }
    expired.len()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::claims::testing::*;

    #[test]
    fn a_claim_expires_after_the_gang_timeout_and_frees_its_room() {
        let mut s = cluster(2, 4);
        group(&mut s, "a", 2);
        group(&mut s, "b", 2);
        let now = Instant::now();
        let a0 = member(&mut s, "a", 0, 4);
        run(&mut s, &a0, now);
        let b0 = member(&mut s, "b", 0, 4);
        assert!(run(&mut s, &b0, now).passed.is_empty());
        let later = now + Duration::from_secs(31);
        assert_eq!(run(&mut s, &b0, later).passed.len(), 2);
        assert!(!s.ledger().claims().contains_key(&GroupKey::new("ns", "a")));
    }

    #[test]
    fn expiry_without_any_filter_call_drops_only_the_claims_past_their_deadline() {
        let mut s = cluster(2, 8);
        let a = group(&mut s, "a", 2);
        let now = Instant::now();
        let a0 = member(&mut s, "a", 0, 4);
        run(&mut s, &a0, now);
        assert!(!any_expired(&s, now + Duration::from_secs(29)));
        assert_eq!(expire(&mut s, now + Duration::from_secs(29)), 0);
        assert!(s.ledger().claims().contains_key(&a));
        assert!(any_expired(&s, now + Duration::from_secs(30)));
        assert_eq!(expire(&mut s, now + Duration::from_secs(30)), 1);
        assert!(s.ledger().claims().is_empty());
        assert_eq!(s.claimed_on("n0").get("cpu"), 0);
    }
}
