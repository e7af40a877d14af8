//! The room a PodGroup's `minResources` keep for members still to come, as admission sees it:
//! placeholder pods ([`Pod::placeholder`]), which the state keeps per group
//! ([`super::Group::owed`]) and remakes as its spec and members change.
//!
//! A group is admitted on the larger of what its members ask and its `minResources`, as
//! Volcano and scheduler-plugins read the field: what the members that came ask, plus what
//! `minResources` still owe, for each resource it names (`pods` aside), at least zero. A member
//! that came is a live one, or one that Succeeded (it used its part); a failed one did not,
//! and its replacement asks for its part again.
//!
//! The owed room is split into equal placeholders, each asking one `pods` besides ([`pieces`]):
//! - while fewer than `minMember` members came, one per member still to come, but only for a
//!   group admitted ahead of its members ([`PodGroup::ahead`]), whose placeholders count as
//!   members (even without `minResources`: each then asks one `pods`). Any other group waits
//!   for `minMember` pods first;
//! - once `minMember` members came, while `minResources` still owe room (a Spark application:
//!   `minMember` 1, `minResources` its driver and all its executors; a LeaderWorkerSet group
//!   started `LeaderReady`), copies of the newest member that came, rounded up: members still
//!   to come are taken to look like the last one (a driver's executors, once the first came,
//!   look like it). Members smaller than that one make the placeholders too few and too large
//!   (admission is stricter than it needs), larger ones too many and too small (the room kept
//!   may be split over more nodes than they fit on; they then wait for room as any pod). As
//!   the pieces are an estimate, the members that fill this room may also be placed in the
//!   head's reservation, which admission made around the room they keep (the ledger's
//!   `keeping`, read by `crate::claims::filter`).
//!
//! Why pods and not a sum: every phase of the admission pass (capabilities, fair share, room
//! node by node, the head's reservation, reclaim) counts pods, so owed room placed as pods
//! takes one placement model. When admission shows the placeholders, gated or released, is
//! `crate::admit::groups`'s to say; the members `minResources` cover count towards the gang
//! there ([`covered`]), and members beyond them are elastic.

use super::objects::{PodGroup, Resources};
use super::resources::ResourceId;
use crate::limits;

/// How many placeholders a group has and what each asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pieces {
    pub count: u32,
    pub piece: Resources,
}

/// `min_resources` less `came`, for each resource `min_resources` names (`pods` aside), at
/// least zero.
pub fn owed(min_resources: &Resources, came: &Resources) -> Resources {
    let mut owed = Resources::new();
    for (id, amount) in min_resources.ids() {
        if id != ResourceId::PODS {
            owed.set_amount(id, amount.saturating_sub(came.amount(id)).max(0));
        }
    }
    owed
}

/// Whether `requests` fit in `room` on every resource `min_resources` names (`pods` aside);
/// what it does not name, it does not bound.
pub fn within(requests: &Resources, room: &Resources, min_resources: &Resources) -> bool {
    requests.ids().all(|(id, amount)| {
        id == ResourceId::PODS || min_resources.amount(id) <= 0 || amount <= room.amount(id)
    })
}

/// The placeholders of `group` when `came` of its members came asking `came_requests` in all;
/// `newest` gives the requests of the newest of them, asked only once `minMember` came.
/// `None`: it has none (see the module docs).
pub fn pieces(
    group: &PodGroup,
    came: u32,
    came_requests: &Resources,
    newest: impl FnOnce() -> Option<Resources>,
) -> Option<Pieces> {
    if !limits::gang_within_limit(group.min_member) {
        return None;
    }
    let owed = owed(&group.min_resources, came_requests);
    let to_come = group.min_member.saturating_sub(came);
    let count = if to_come > 0 {
        if !group.ahead {
            return None;
        }
        to_come
    } else if owed.is_empty() {
        return None;
    } else {
        copies(&owed, &newest()?)
    };
    let mut piece = owed.part(count);
    piece.set_amount(ResourceId::PODS, 1);
    Some(Pieces { count, piece })
}

/// How many copies of `unit` it takes to hold `owed`, rounded up: at least one, at most the
/// largest gang.
fn copies(owed: &Resources, unit: &Resources) -> u32 {
    let copies = owed
        .ids()
        .filter(|(id, _)| *id != ResourceId::PODS)
        .filter_map(|(id, amount)| {
            let each = unit.amount(id);
            (each > 0).then(|| amount.saturating_add(each - 1) / each)
        })
        .max()
        .unwrap_or(1);
    u32::try_from(copies)
        .unwrap_or(u32::MAX)
        .clamp(1, limits::MAX_MEMBERS)
}

/// How many of the members that came, oldest first (`came`, each member's requests),
/// `min_resources` cover: the longest run of them whose requests together fit in it. With no
/// `minResources`, none.
pub fn covered<'a>(
    min_resources: &Resources,
    came: impl IntoIterator<Item = &'a Resources>,
) -> u32 {
    if min_resources.is_empty() {
        return 0;
    }
    let mut sum = Resources::new();
    let mut covered = 0;
    for requests in came {
        sum.add(requests);
        if !within(&sum, min_resources, min_resources) {
            break;
        }
        covered += 1;
    }
    covered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GroupKey;

    fn cpu(millis: i64) -> Resources {
        Resources::from([("cpu", millis)])
    }

    fn group(min_member: u32, min_resources: Resources, ahead: bool) -> PodGroup {
        PodGroup {
            min_resources,
            ahead,
            ..PodGroup::new(GroupKey::new("ns", "g"), min_member, "q")
        }
    }

    fn with_pods(mut r: Resources) -> Resources {
        r.set("pods", 1);
        r
    }

    #[test]
    fn a_spark_driver_leaves_its_executors_room_owed_as_copies_of_itself() {
        // minMember 1; minResources: a driver of 1 CPU and 4 executors of 1 CPU.
        let spark = group(1, cpu(5_000), true);
        assert_eq!(
            pieces(&spark, 0, &Resources::new(), || None),
            Some(Pieces {
                count: 1,
                piece: with_pods(cpu(5_000))
            }),
            "before the driver: one placeholder for the whole application"
        );
        assert_eq!(
            pieces(&spark, 1, &cpu(1_000), || Some(cpu(1_000))),
            Some(Pieces {
                count: 4,
                piece: with_pods(cpu(1_000))
            })
        );
        assert_eq!(
            pieces(&spark, 5, &cpu(5_000), || Some(cpu(1_000))),
            None,
            "every executor came: nothing is owed"
        );
    }

    #[test]
    fn a_group_that_is_not_admitted_ahead_has_no_placeholders_before_min_member_came() {
        let plain = group(4, cpu(4_000), false);
        assert_eq!(pieces(&plain, 2, &cpu(2_000), || Some(cpu(1_000))), None);
        let ahead = group(4, cpu(4_000), true);
        assert_eq!(
            pieces(&ahead, 2, &cpu(2_000), || None),
            Some(Pieces {
                count: 2,
                piece: with_pods(cpu(1_000))
            })
        );
        let no_resources = group(3, Resources::new(), true);
        assert_eq!(
            pieces(&no_resources, 0, &Resources::new(), || None),
            Some(Pieces {
                count: 3,
                piece: Resources::from([("pods", 1)])
            }),
            "admitted ahead without minResources: a pod's place each"
        );
    }

    #[test]
    fn the_owed_room_counts_only_what_min_resources_name_and_never_below_zero() {
        let min = Resources::from([("cpu", 4_000), ("memory", 8), ("pods", 4)]);
        let came = Resources::from([("cpu", 5_000), ("memory", 2), ("pods", 1), ("gpu", 1)]);
        assert_eq!(owed(&min, &came), Resources::from([("memory", 6)]));
        assert!(within(
            &Resources::from([("memory", 6), ("pods", 1), ("nvidia.com/gpu", 8)]),
            &owed(&min, &came),
            &min
        ));
        assert!(!within(
            &Resources::from([("cpu", 1)]),
            &owed(&min, &came),
            &min
        ));
    }

    #[test]
    fn members_that_do_not_look_like_the_newest_make_rounded_up_copies_of_it() {
        let spark = group(1, Resources::from([("cpu", 9_000), ("memory", 9)]), false);
        let newest = Resources::from([("cpu", 2_000), ("memory", 4)]);
        let made = pieces(
            &spark,
            1,
            &Resources::from([("cpu", 1_000), ("memory", 1)]),
            || Some(newest),
        )
        .unwrap();
        // 8 CPUs owed are four of its copies, 8 bytes two: four copies, each a fourth.
        assert_eq!(made.count, 4);
        assert_eq!(
            made.piece,
            Resources::from([("cpu", 2_000), ("memory", 2), ("pods", 1)])
        );
    }

    #[test]
    fn min_resources_cover_the_oldest_members_up_to_their_sum() {
        let min = cpu(5_000);
        let came = [cpu(1_000), cpu(2_000), cpu(2_000), cpu(2_000)];
        assert_eq!(covered(&min, &came), 3);
        assert_eq!(covered(&Resources::new(), &came), 0);
    }
}
