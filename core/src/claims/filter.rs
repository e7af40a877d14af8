//! The filter verb: judges each candidate node for a pod, and takes its gang's claim the first
//! time a member of a gang without quorum is filtered (or moves the claim's deadline on). A
//! node passes where the pod fits in its own gang's slot there, or in room no gang has
//! claimed; a gang that cannot claim fails every node with a reason kept for its PodGroup's
//! status. Writes the claims and wait reasons of the [`State`] it is given.

use std::collections::BTreeMap;
use std::time::Instant;

use rustc_hash::FxHashSet;

use super::binds::{LiveInstances, quorum_count};
use super::expiry::expire;
use super::slots::{by_node_selector, fits_on_empty, member_shapes, plan_parts};
use super::{Error, FailReason, FilterVerdict, Settings, gate_removed_by_other, spec};
use crate::limits;
use crate::model::sub_groups::{self, Instance};
use crate::model::{Claim, GroupKey, Pod, PodGroup, ResourceId, Resources, State};
use crate::policy::constraints::Constraints;
use crate::policy::fit::size;

/// Filters `candidates` for `pod` (already converted from the request), creating or refreshing
/// its gang's claim. A pod with a queue but no group (a group of one) lands only in room no
/// gang has claimed, like a gang's elastic extras: admission counted on that, and a backfill
/// head's reservation is a claim. Pods in neither pass through untouched; a pod whose gate
/// someone other than Gangplank removed is an error.
pub fn filter<'a, S: AsRef<str>>(
    state: &mut State,
    pod: &Pod,
    constraints: &Constraints,
    candidates: &'a [S],
    settings: &Settings,
    now: Instant,
) -> Result<FilterVerdict<'a>, Error> {
    let mut verdict = judge(state, pod, constraints, candidates, settings, now)?;
    verdict.preempts_stand_ins = GroupKey::of(pod)
        .and_then(|key| state.stand_ins().get(&key))
        .is_some_and(|stand_ins| !stand_ins.is_empty());
    Ok(verdict)
}

/// Whether `pod` is a member of `group`, a tree the scheduler places itself
/// ([`PodGroup::placed_whole_by_scheduler`] with sub-groups), outside the instances that make
/// its minimum while no minimum is placed: the scheduler's tree cycle takes children in its
/// own order without going back, so instances beyond the minimum, released with it, would
/// otherwise take the room the minimum needs.
fn beyond_an_unplaced_minimum(state: &State, group: &PodGroup, pod: &Pod) -> bool {
    if !group.placed_whole_by_scheduler || group.sub_groups.is_empty() {
        return false;
    }
    let Some(LiveInstances {
        live, instances, ..
    }) = LiveInstances::of(state, group)
    else {
        return false;
    };
    let placed = |m: &usize| state.holds_room(live[*m].0, live[*m].1);
    let started = |i: &Instance| {
        i.members.iter().filter(|m| placed(m)).count()
            >= group.sub_groups[i.sub_group].size as usize
    };
    match sub_groups::minimum(&group.sub_groups, &instances, &started) {
        Ok(chosen) if !chosen.is_empty() => !chosen.iter().any(|&m| *live[m].0 == pod.uid),
        _ => false,
    }
}

/// [`filter`]'s verdict on the nodes.
fn judge<'a, S: AsRef<str>>(
    state: &mut State,
    pod: &Pod,
    constraints: &Constraints,
    candidates: &'a [S],
    settings: &Settings,
    now: Instant,
) -> Result<FilterVerdict<'a>, Error> {
    if gate_removed_by_other(pod, settings) {
        // An error, not a reason per node: its answer stays small however many nodes are asked.
        return Err(Error::GateRemovedByOther {
            pod: format!("{}/{}", pod.namespace, pod.name),
        });
    }
    let Some(key) = GroupKey::of(pod) else {
        if pod.queue.is_some() {
            expire(state, now);
            return Ok(per_node(state, pod, candidates, &FxHashSet::default()));
        }
        return Ok(FilterVerdict {
            passed: candidates.iter().map(AsRef::as_ref).collect(),
            ..FilterVerdict::default()
        });
    };
    expire(state, now);
    let group = spec(state, pod, &key)?;
    let placed = quorum_count(state, &key, &pod.uid);
    if beyond_an_unplaced_minimum(state, &group, pod) {
        let why = format!(
            "{key} places the instances of its minimum first; this member's instance is beyond it"
        );
        // Unresolvable, not an Error to try again later: the scheduler's tree cycle fails the
        // whole tree on an Error, and places the rest without this child on a failure.
        return Ok(FilterVerdict::all_fail(candidates, &why, true));
    }
    if let Some(max) = group.max_member
        && placed >= max as usize
    {
        let why = format!("gang {key} already has maxMember={max} members placed");
        return Ok(FilterVerdict::all_fail(candidates, &why, true));
    }
    // Members filling room the group's `minResources` keep may also take the head's
    // reservation: admission counted that room as taken before it reserved, as pieces of an
    // estimated shape that the members may need on other nodes.
    let keeping = state.ledger().keeping().contains(&key);
    if placed >= group.min_member as usize {
        // Quorum: extra (elastic) members take only room nobody has claimed.
        let reserved = if keeping {
            in_reservation(state, &pod.requests)
        } else {
            FxHashSet::default()
        };
        return Ok(per_node(state, pod, candidates, &reserved));
    }
    if !limits::gang_within_limit(group.min_member) {
        let why = too_large(&key, group.min_member);
        state.ledger_mut().set_wait_reason(&key, Some(why.clone()));
        return Ok(FilterVerdict::all_fail(candidates, &why, true));
    }
    let deadline = now + settings.timeout(&group);
    let own = state.ledger().claims().get(&key);
    if own.is_some_and(|c| !c.reservation() && holding(c, &pod.requests, false).is_empty()) {
        // No slot holds this member: room kept in pieces (a head's reservation that became
        // its claim before all it lacked was free), which with the room left free may well
        // hold it. Planned again from both; kept, it would refuse its own members.
        state.ledger_mut().drop_claim(&key);
    }
    if !state.ledger_mut().extend_claim(&key, deadline) {
        let needed = group.min_member as usize - placed;
        let shapes = member_shapes(state, &key, pod, needed);
        let parts = by_node_selector(shapes, &pod.node_selector, constraints);
        let lent = keeping || state.ledger().lent().contains(&key);
        match plan_parts(state, &parts, settings.strategy, lent) {
            Ok(slots) => {
                state.ledger_mut().set_wait_reason(&key, None);
                state.ledger_mut().set_claim(
                    &key,
                    Claim {
                        slots,
                        deadline: Some(deadline),
                        ..Default::default()
                    },
                )
            }
            Err(fitted) => {
                let never = !parts.iter().all(|(c, part)| fits_on_empty(state, part, c));
                let shapes: Vec<Resources> = parts.into_iter().flat_map(|(_, part)| part).collect();
                let why = waiting_message(&key, &group, &shapes, placed, fitted, never);
                // Kept for the PodGroup's status (the controller reads it).
                state.ledger_mut().set_wait_reason(&key, Some(why.clone()));
                return Ok(FilterVerdict::all_fail(candidates, &why, never));
            }
        }
    }
    // The nodes where a slot of the claim holds this pod, looked up once per candidate instead
    // of scanning every slot per candidate.
    let claim = &state.ledger().claims()[&key];
    let tightest = holding(claim, &pod.requests, true);
    let verdict = per_node(state, pod, candidates, &tightest);
    if verdict.passed.is_empty() {
        // None of the tightest slots' nodes is a candidate: any slot that holds the pod will do.
        let any = holding(claim, &pod.requests, false);
        if any.len() > tightest.len() {
            return Ok(per_node(state, pod, candidates, &any));
        }
    }
    Ok(verdict)
}

/// Why the gang `key` of `min_member` is never placed: it is larger than [`limits::MAX_MEMBERS`]
/// (a PodGroup written before the limit, which the webhook refuses now).
fn too_large(key: &GroupKey, min_member: u32) -> String {
    format!(
        "gang {key} has minMember {min_member}, more than Gangplank's largest gang ({}): it is never placed; lower spec.minMember",
        limits::MAX_MEMBERS
    )
}

/// The nodes where a slot of `claim` holds a pod asking `requests`; with `tightest`, only
/// those of the smallest such slots ([`size`]). A gang's members differ (a launcher and its
/// workers, a Ray head without the workers' init container), and a small member that took a
/// big member's slot would leave the big one only a slot too small for it.
pub fn holding<'c>(claim: &'c Claim, requests: &Resources, tightest: bool) -> FxHashSet<&'c str> {
    let covering = claim.slots.iter().filter(|s| requests.fits_in(&s.requests));
    let smallest = covering.clone().map(|s| size(&s.requests)).min();
    covering
        .filter(|s| !tightest || Some(size(&s.requests)) == smallest)
        .map(|s| s.node.as_str())
        .collect()
}

/// The nodes where a pod asking `requests` fits in the room left free there plus what the
/// head's reservation holds there.
fn in_reservation<'s>(state: &'s State, requests: &Resources) -> FxHashSet<&'s str> {
    let Some(reservation) = state.ledger().claims().values().find(|c| c.reservation()) else {
        return FxHashSet::default();
    };
    reservation
        .per_node()
        .into_iter()
        .filter(|(node, held)| {
            state
                .nodes()
                .slot(node)
                .is_some_and(|slot| requests.fits_in_with(&slot.free, held))
        })
        .map(|(node, _)| node)
        .collect()
}

/// Judges each candidate node for `pod`: a node passes where the pod fits in its own gang's
/// slot there (`own_slot`: the nodes where one holds it), or else in room that no gang has
/// claimed. One lookup per candidate, no allocation but the answer's; nodes failing for the
/// same reason share its text.
fn per_node<'a, S: AsRef<str>>(
    state: &State,
    pod: &Pod,
    candidates: &'a [S],
    own_slot: &FxHashSet<&str>,
) -> FilterVerdict<'a> {
    let requests = &pod.requests;
    let mut passed = Vec::with_capacity(candidates.len());
    let mut failed = Vec::new();
    let mut reasons = Reasons::default();
    for name in candidates {
        let name = name.as_ref();
        let Some(slot) = state.nodes().slot(name).filter(|slot| slot.node.is_some()) else {
            failed.push((name, reasons.unknown()));
            continue;
        };
        // `free` is allocatable minus used, reserved and claimed; plus `claimed`, the room
        // outside any claim.
        if requests.fits_in(&slot.free) || own_slot.contains(name) {
            passed.push(name);
        } else if requests.fits_in_with(&slot.free, &slot.claimed) {
            failed.push((name, reasons.claimed()));
        } else {
            failed.push((
                name,
                reasons.insufficient(requests, &slot.free, &slot.claimed),
            ));
        }
    }
    FilterVerdict {
        passed,
        // Built in one go (sorted, then bulk-loaded): cheaper than thousands of inserts.
        failed: failed.into_iter().collect(),
        unresolvable: BTreeMap::new(),
        preempts_stand_ins: false,
    }
}

/// The reasons of one `per_node` call, each written once.
#[derive(Default)]
struct Reasons {
    unknown: Option<FailReason>,
    claimed: Option<FailReason>,
    /// By the set of resources short (a bit per resource id).
    insufficient: Vec<(u64, FailReason)>,
}

impl Reasons {
    fn unknown(&mut self) -> FailReason {
        self.unknown
            .get_or_insert_with(|| FailReason::from("node is not in Gangplank's cache yet"))
            .clone()
    }

    fn claimed(&mut self) -> FailReason {
        self.claimed
            .get_or_insert_with(|| FailReason::from("room is claimed by other gangs"))
            .clone()
    }

    /// The reason for a node where `requests` does not fit in `free` plus `claimed`.
    fn insufficient(
        &mut self,
        requests: &Resources,
        free: &Resources,
        claimed: &Resources,
    ) -> FailReason {
        let room = |i: ResourceId| free.amount(i).saturating_add(claimed.amount(i));
        // Which resources are short, a bit per id; past id 63 the reason is not kept.
        let short = requests
            .ids()
            .filter(|&(i, need)| need > 0 && need > room(i))
            .try_fold(0u64, |mask, (i, _)| {
                (i.index() < 64).then(|| mask | 1 << i.index())
            });
        let known = short.and_then(|short| self.insufficient.iter().find(|(m, _)| *m == short));
        if let Some((_, why)) = known {
            return why.clone();
        }
        let why = FailReason::from(insufficient(requests, &free.plus(claimed)).as_str());
        if let Some(short) = short {
            self.insufficient.push((short, why.clone()));
        }
        why
    }
}

/// `insufficient cpu, nvidia.com/gpu`: the resources of which `requests` needs more than `free`
/// holds, in id order, written into one string.
fn insufficient(requests: &Resources, free: &Resources) -> String {
    let mut why = String::from("insufficient ");
    let mut first = true;
    for (id, need) in requests.ids() {
        if need > 0 && need > free.amount(id) {
            if !first {
                why.push_str(", ");
            }
            why.push_str(id.name());
            first = false;
        }
    }
    why
}

fn waiting_message(
    key: &GroupKey,
    group: &PodGroup,
    shapes: &[Resources],
    placed: usize,
    fitted: usize,
    never: bool,
) -> String {
    let shape = &shapes[0];
    let uniform = shapes.iter().all(|s| s == shape);
    let what = if uniform {
        format!("{} more pods of {{{shape}}}", shapes.len())
    } else {
        format!("{} more pods (the largest {{{shape}}})", shapes.len())
    };
    if never {
        format!(
            "gang {key} (minMember {}) can never fit: it needs {what} and the nodes this pod may use hold only {fitted} even when empty",
            group.min_member
        )
    } else {
        format!(
            "gang {key} waits for room: {placed}/{} members placed, needs {what}; only {fitted} fit in capacity not used or claimed by other gangs",
            group.min_member
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::testing::*;
    use crate::model::Slot;
    use crate::testing::{PodBuilder, pod};

    #[test]
    fn members_filling_room_kept_on_min_resources_may_take_the_heads_reservation_others_not() {
        let mut s = cluster(1, 8);
        reserve_on_n0(&mut s, 6_000);
        // A driver of 2 CPUs runs on n0; its group keeps room for its executors, which the
        // head's reservation was made around.
        for name in ["spark", "other"] {
            group(&mut s, name, 1);
            s.apply_pod(
                pod(format!("{name}-driver"))
                    .in_group(name)
                    .cpu(1_000)
                    .running_on("n0"),
            );
        }
        let executor = member(&mut s, "spark", 0, 2);
        let extra = member(&mut s, "other", 0, 2);
        assert!(run(&mut s, &executor, Instant::now()).passed.is_empty());

        s.ledger_mut().set_keeping([GroupKey::new("ns", "spark")]);
        assert_eq!(run(&mut s, &executor, Instant::now()).passed, vec!["n0"]);
        assert!(
            run(&mut s, &extra, Instant::now()).passed.is_empty(),
            "another gang's extra member takes only room nobody claimed"
        );
    }

    #[test]
    fn pods_in_no_group_pass_every_node_without_a_claim() {
        let mut s = cluster(3, 4);
        let pod = Pod {
            pod_group: None,
            ..member(&mut s, "x", 0, 100)
        };
        let v = run(&mut s, &pod, Instant::now());
        assert_eq!(v.passed.len(), 3);
        assert!(s.ledger().claims().is_empty());
    }

    #[test]
    fn a_pod_of_a_queue_in_no_group_lands_only_outside_claims_and_takes_none() {
        let mut s = cluster(2, 8);
        reserve_on_n0(&mut s, 6_000);
        let pod = Pod {
            pod_group: None,
            queue: Some("batch".into()),
            ..member(&mut s, "solo", 0, 4)
        };
        let v = run(&mut s, &pod, Instant::now());
        assert_eq!(v.passed, vec!["n1"]);
        assert_eq!(v.failed["n0"], "room is claimed by other gangs");
        assert_eq!(
            s.ledger().claims().len(),
            1,
            "a group of one claims nothing"
        );
        // Room beside the claim is still open to it.
        let small = Pod {
            uid: "small".into(),
            requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
            ..pod
        };
        assert_eq!(run(&mut s, &small, Instant::now()).passed, vec!["n0", "n1"]);
    }

    #[test]
    fn a_gang_member_whose_gate_someone_else_removed_is_an_error_and_claims_nothing() {
        let mut s = cluster(2, 8);
        group(&mut s, "g", 2);
        let forged = member(&mut s, "g", 0, 1);
        let recorded = Pod {
            admission_recorded: true,
            ..member(&mut s, "g", 1, 1)
        };
        let gated = Settings {
            gated_admission: true,
            ..SETTINGS
        };
        let names = names(&s);
        let now = Instant::now();
        let none = Constraints::default();
        let err = filter(&mut s, &forged, &none, &names, &gated, now).unwrap_err();
        assert!(matches!(err, Error::GateRemovedByOther { .. }), "{err}");
        assert!(s.ledger().claims().is_empty(), "no claim taken for it");
        let v = filter(&mut s, &recorded, &none, &names, &gated, now).unwrap();
        assert_eq!(
            v.passed,
            vec!["n0", "n1"],
            "a member Gangplank admitted is placed"
        );
    }

    #[test]
    fn a_gang_that_fits_claims_room_for_every_member_it_still_needs() {
        let mut s = cluster(2, 8);
        let key = group(&mut s, "g", 4);
        let pod = member(&mut s, "g", 0, 4);
        let v = run(&mut s, &pod, Instant::now());
        assert_eq!(v.passed, vec!["n0", "n1"]);
        assert_eq!(s.ledger().claims()[&key].slots.len(), 4);
        assert_eq!(
            s.claimed_on("n0").get("cpu") + s.claimed_on("n1").get("cpu"),
            16_000
        );
    }

    #[test]
    fn a_claim_too_small_for_every_member_is_planned_again_with_the_room_left_free() {
        let mut s = cluster(2, 8);
        let key = group(&mut s, "g", 2);
        // The head's reservation became its claim while 3 of n0's CPUs were all it held:
        // n0 has 5 more free, and n1 all of its 8.
        s.ledger_mut().set_claim(
            &key,
            Claim {
                slots: vec![Slot {
                    node: "n0".into(),
                    requests: Resources::from([("cpu", 3_000), ("pods", 1)]),
                }],
                deadline: Some(Instant::now() + std::time::Duration::from_secs(30)),
                ..Default::default()
            },
        );
        let pod = member(&mut s, "g", 0, 6);
        member(&mut s, "g", 1, 6);
        let v = run(&mut s, &pod, Instant::now());
        assert_eq!(v.passed, vec!["n0", "n1"], "{v:?}");
        assert_eq!(
            s.claimed_on("n0").get("cpu") + s.claimed_on("n1").get("cpu"),
            12_000
        );
    }

    #[test]
    fn a_gang_of_eight_where_six_fit_is_refused_on_every_node_with_the_reason() {
        let mut s = cluster(3, 8);
        let key = group(&mut s, "big", 8);
        let pod = member(&mut s, "big", 0, 4);
        let v = run(&mut s, &pod, Instant::now());
        assert!(v.passed.is_empty());
        assert!(
            v.failed.is_empty(),
            "the cluster is too small even when empty"
        );
        assert_eq!(v.unresolvable.len(), 3);
        let why = &v.unresolvable["n0"];
        assert!(
            why.contains("gang ns/big (minMember 8) can never fit"),
            "{why}"
        );
        assert!(why.contains("hold only 6"), "{why}");
        assert!(!s.ledger().claims().contains_key(&key));
    }

    #[test]
    fn the_second_of_two_gangs_needing_sixty_percent_waits_whole() {
        let mut s = cluster(10, 4);
        group(&mut s, "a", 6);
        group(&mut s, "b", 6);
        let a0 = member(&mut s, "a", 0, 4);
        let b0 = member(&mut s, "b", 0, 4);
        let now = Instant::now();
        assert_eq!(
            run(&mut s, &a0, now).passed.len(),
            10,
            "a may use any free room"
        );
        assert_eq!(
            s.ledger().claims()[&GroupKey::new("ns", "a")].slots.len(),
            6
        );
        let v = run(&mut s, &b0, now);
        assert!(v.passed.is_empty(), "b must not take any of a's room");
        let why = &v.failed["n0"];
        assert!(
            why.contains("gang ns/b waits for room: 0/6 members placed"),
            "{why}"
        );
        assert!(why.contains("only 4 fit"), "{why}");
        let b = GroupKey::new("ns", "b");
        assert_eq!(
            s.ledger().wait_reasons().get(&b).map(String::as_str),
            Some(&**why),
            "the reason is kept for b's PodGroup status"
        );
        s.delete_pod_group(&GroupKey::new("ns", "a"));
        run(&mut s, &b0, now);
        assert_eq!(s.ledger().wait_reasons().get(&b), None, "b claimed room");
    }

    #[test]
    fn members_land_only_where_their_claim_or_unclaimed_room_is() {
        let mut s = cluster(4, 4);
        group(&mut s, "a", 2);
        group(&mut s, "b", 2);
        let now = Instant::now();
        let a0 = member(&mut s, "a", 0, 4);
        run(&mut s, &a0, now);
        let a_nodes: Vec<String> = s.ledger().claims()[&GroupKey::new("ns", "a")]
            .slots
            .iter()
            .map(|s| s.node.clone())
            .collect();
        let b0 = member(&mut s, "b", 0, 4);
        let v = run(&mut s, &b0, now);
        for n in &a_nodes {
            assert_eq!(v.failed[n.as_str()], "room is claimed by other gangs");
        }
        assert_eq!(v.passed.len(), 2);
        let a1 = member(&mut s, "a", 1, 4);
        let v = run(&mut s, &a1, now);
        let mut passed = v.passed.clone();
        passed.sort();
        let mut expected = a_nodes.clone();
        expected.sort();
        assert_eq!(passed, expected, "a's members stay on a's claim");
    }

    #[test]
    fn elastic_members_beyond_quorum_take_only_unclaimed_room_up_to_max_member() {
        let mut s = cluster(4, 4);
        let key = group(&mut s, "e", 2);
        let mut spec = (*s.groups()[&key].spec.clone().unwrap()).clone();
        spec.max_member = Some(3);
        s.apply_pod_group(spec);
        let now = Instant::now();
        for i in 0..2 {
            let mut p = member(&mut s, "e", i, 4);
            p.node_name = Some(format!("n{i}"));
            s.apply_pod(p);
        }
        let extra = member(&mut s, "e", 2, 4);
        let v = run(&mut s, &extra, now);
        assert_eq!(v.passed, vec!["n2", "n3"]);
        let mut p = extra.clone();
        p.node_name = Some("n2".into());
        s.apply_pod(p);
        let fourth = member(&mut s, "e", 3, 4);
        let v = run(&mut s, &fourth, now);
        assert_eq!(v.unresolvable.len(), 4, "{v:?}");
    }

    #[test]
    fn a_pod_naming_a_missing_group_gets_an_error_that_says_what_to_do() {
        let mut s = cluster(1, 4);
        let pod = member(&mut s, "ghost", 0, 1);
        let candidates = names(&s);
        let err = filter(
            &mut s,
            &pod,
            &Constraints::default(),
            &candidates,
            &SETTINGS,
            Instant::now(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("create the PodGroup"), "{err}");
    }

    /// The tree `svc` the scheduler places itself: 2 instances of 2 members needed, 3 there.
    fn tree(s: &mut State) -> Vec<Pod> {
        let key = group(s, "svc", 4);
        let mut spec = s.groups()[&key].spec.as_deref().unwrap().clone();
        spec.placed_whole_by_scheduler = true;
        spec.sub_groups = vec![crate::model::sub_groups::SubGroup {
            name: "slices".into(),
            size: 2,
            min_count: 2,
            selector: Default::default(),
            match_label_keys: vec!["slice".into()],
            topology_key: None,
        }];
        s.apply_pod_group(spec);
        (0..6)
            .map(|i| {
                let pod = pod(format!("svc-{i}"))
                    .in_group("svc")
                    .cpu(1_000)
                    .marked()
                    .labeled("slice", &(i / 2).to_string());
                s.apply_pod(pod.clone());
                pod
            })
            .collect()
    }

    #[test]
    fn a_tree_the_scheduler_places_gets_no_node_for_an_instance_beyond_its_minimum_until_the_minimum_is_placed()
     {
        let mut s = cluster(2, 8);
        let members = tree(&mut s);
        let now = Instant::now();
        assert_eq!(run(&mut s, &members[0], now).passed.len(), 2);
        let beyond = run(&mut s, &members[4], now);
        assert!(beyond.passed.is_empty(), "{:?}", beyond.passed);
        for m in &members[..4] {
            s.apply_pod(m.clone().running_on("n0"));
        }
        assert!(
            !run(&mut s, &members[4], now).passed.is_empty(),
            "the minimum placed, the third instance may go where room is free"
        );
    }

    #[test]
    fn a_gang_whose_instances_keep_to_different_racks_claims_each_instance_in_its_own_rack() {
        let mut s = cluster(4, 8);
        for (i, rack) in ["a", "a", "b", "b"].into_iter().enumerate() {
            let name = format!("n{i}");
            let node = s.nodes().get(&name).unwrap().as_ref().clone();
            s.apply_node(crate::model::Node {
                labels: [("rack".to_owned(), rack.to_owned())].into(),
                ..node
            });
        }
        group(&mut s, "train", 4);
        // Two slices of two 8-CPU members, released into racks a and b: no rack holds all four.
        let members: Vec<Pod> = (0..4)
            .map(|i| {
                let rack = if i < 2 { "a" } else { "b" };
                let pod = Pod {
                    node_selector: [("rack".to_owned(), rack.to_owned())].into(),
                    ..member(&mut s, "train", i, 8)
                };
                s.apply_pod(pod.clone());
                pod
            })
            .collect();
        let in_rack_a = Constraints {
            node_selector: vec![("rack".into(), "a".into())],
            ..Constraints::default()
        };
        let candidates = ["n0".to_owned(), "n1".to_owned()];
        let v = filter(
            &mut s,
            &members[0],
            &in_rack_a,
            &candidates,
            &SETTINGS,
            Instant::now(),
        )
        .unwrap();
        assert_eq!(v.passed, ["n0", "n1"], "{v:?}");
        let claim = &s.ledger().claims()[&GroupKey::new("ns", "train")];
        let mut nodes: Vec<&str> = claim.slots.iter().map(|slot| slot.node.as_str()).collect();
        nodes.sort_unstable();
        assert_eq!(
            nodes,
            ["n0", "n1", "n2", "n3"],
            "a slot per member, each in its rack"
        );
    }
}
