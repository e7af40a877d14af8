//! The bind verb's bookkeeping: which binds Gangplank refuses, the reservation of a pod the
//! scheduler assumed on a node, the slot of its gang's claim that the member gives up, the
//! quorum count, and the release of held binds that failed. Writes the reservations and
//! claims of the [`State`] it is given.

use std::time::Instant;

use super::{Error, Settings, gate_removed_by_other, spec};
use crate::model::sub_groups;
use crate::model::{
    GroupKey, Member, Pod, PodGroup, PodPhase, Reservation, Resources, Slot, State,
};
use crate::policy::fit::size;

/// Which held binds of a gang a bind call lets go, this call's among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// None: the gang lacks quorum, or the member's instance (a gang of sub-groups) is not
    /// placed whole yet. The call is held.
    Hold,
    /// Every held bind of the gang.
    Gang,
    /// The held binds of these members (UIDs) only: a gang of sub-groups that has quorum binds
    /// an instance once every member of it is placed, never part of one
    /// ([`crate::model::sub_groups`]); the others stay held.
    Members(Vec<String>),
}

/// Records that the scheduler assumed `uid` on `node` (the bind call) and moves the gang's
/// claim accordingly. Returns the pod's group and which held binds now go.
pub fn reserve(
    state: &mut State,
    uid: &str,
    display: &str,
    node: &str,
    settings: &Settings,
    now: Instant,
) -> Result<Option<(PodGroup, Release)>, Error> {
    let pod = state
        .pods()
        .get(uid)
        .cloned()
        .ok_or_else(|| Error::UnknownPod {
            pod: display.to_owned(),
        })?;
    bindable(&pod, uid, display, settings)?;
    selects(state, &pod, display, node)?;
    let Some(key) = GroupKey::of(&pod) else {
        return Ok(None);
    };
    let group = spec(state, &pod, &key)?;
    state.ledger_mut().reserve(
        uid,
        Reservation {
            node: node.to_owned(),
            requests: pod.requests.clone(),
            group: Some(key.clone()),
        },
    );
    take_slot(
        state,
        &key,
        &pod.requests,
        node,
        now + settings.timeout(&group),
    );
    let quorum = quorum_count(state, &key, "") >= group.min_member as usize;
    if quorum {
        state.ledger_mut().drop_claim(&key);
    }
    let release = match quorum {
        false => Release::Hold,
        true if group.sub_groups.is_empty() => Release::Gang,
        true => whole_instances(state, &group, uid),
    };
    Ok(Some((group, release)))
}

/// The placed members of `group` (a gang of sub-groups with quorum) whose instance is placed
/// whole, and those in no instance; [`Release::Hold`] when `uid`'s instance is not whole yet.
fn whole_instances(state: &State, group: &PodGroup, uid: &str) -> Release {
    let Some(LiveInstances {
        live,
        instances,
        strays,
    }) = LiveInstances::of(state, group)
    else {
        return Release::Gang;
    };
    let placed = |&m: &usize| state.holds_room(live[m].0, live[m].1);
    let uids = |members: &[usize]| -> Vec<String> {
        members
            .iter()
            .filter(|m| placed(m))
            .map(|&m| live[m].0.clone())
            .collect()
    };
    let mut release = uids(&strays);
    let mut own_whole = true;
    for i in &instances {
        let whole = i.members.iter().filter(|m| placed(m)).count()
            >= group.sub_groups[i.sub_group].size as usize;
        if i.members.iter().any(|&m| live[m].0 == uid) {
            own_whole = whole;
        }
        if whole {
            release.extend(uids(&i.members));
        }
    }
    if own_whole {
        Release::Members(release)
    } else {
        Release::Hold
    }
}

/// The live members of a gang of sub-groups (UID and member), split into instances; `strays`
/// are the indexes of those in no instance.
pub(super) struct LiveInstances<'s> {
    pub(super) live: Vec<(&'s String, &'s Member)>,
    pub(super) instances: Vec<sub_groups::Instance<'s>>,
    pub(super) strays: Vec<usize>,
}

impl<'s> LiveInstances<'s> {
    /// `None` when `state` does not show the group.
    pub(super) fn of(state: &'s State, group: &PodGroup) -> Option<Self> {
        let g = state.group(&group.key)?;
        let live: Vec<(&String, &Member)> = g.members.iter().filter(|(_, m)| m.live).collect();
        let labels = live.iter().map(|(_, m)| &*m.pod.labels);
        let (instances, strays) = sub_groups::instances(&group.sub_groups, labels);
        Some(LiveInstances {
            live,
            instances,
            strays,
        })
    }
}

/// Refuses a bind the scheduler serving Gangplank would not ask for: a pod other than the one
/// `uid` names (`display` is `namespace/name`), a pod already bound, one without the marker
/// resource (unless `settings.bind_unmarked`), one still at Gangplank's gate, and one of a
/// group or queue whose gate someone else removed (`settings.gated_admission`).
fn bindable(pod: &Pod, uid: &str, display: &str, settings: &Settings) -> Result<(), Error> {
    let same = display
        .strip_prefix(pod.namespace.as_str())
        .and_then(|rest| rest.strip_prefix('/'))
        == Some(pod.name.as_str());
    if !same {
        return Err(Error::NotThisPod {
            pod: display.to_owned(),
            uid: uid.to_owned(),
            owner: format!("{}/{}", pod.namespace, pod.name),
        });
    }
    if let Some(node) = &pod.node_name {
        return Err(Error::AlreadyBound {
            pod: display.to_owned(),
            node: node.clone(),
        });
    }
    if !pod.marked && !settings.bind_unmarked {
        return Err(Error::NotManaged {
            pod: display.to_owned(),
        });
    }
    if pod.awaits_admission() {
        return Err(Error::NotAdmitted {
            pod: display.to_owned(),
        });
    }
    if !settings.bind_unmarked && pod.pod_group.is_none() && pod.queue.is_none() {
        return Err(Error::MarkedOutsideAnyQueue {
            pod: display.to_owned(),
        });
    }
    if gate_removed_by_other(pod, settings) {
        return Err(Error::GateRemovedByOther {
            pod: display.to_owned(),
        });
    }
    Ok(())
}

/// The pod's `spec.nodeSelector` matches `node`, when the model knows the node (one the
/// watch has not shown yet is left to the scheduler, which has checked it): a caller of bind
/// cannot put a pod on a node the pod does not select.
fn selects(state: &State, pod: &Pod, display: &str, node: &str) -> Result<(), Error> {
    let Some(known) = state.nodes().get(node) else {
        return Ok(());
    };
    match pod
        .node_selector
        .iter()
        .find(|(k, v)| known.labels.get(k.as_str()) != Some(v))
    {
        None => Ok(()),
        Some((k, v)) => Err(Error::NodeNotSelected {
            pod: display.to_owned(),
            node: node.to_owned(),
            label: format!("{k}={v}"),
        }),
    }
}

/// Forgets the reservations of `uids` and the gang's claim: the held binds failed or timed
/// out, so the scheduler frees the pods and retries them.
pub fn release(state: &mut State, key: &GroupKey, uids: &[String]) {
    for uid in uids {
        state.ledger_mut().release(uid);
    }
    state.ledger_mut().drop_claim(key);
}

/// Members bound (running, or succeeded: they ran as part of the gang) or reserved, other than
/// `except`. A member that succeeded still counts: a gang whose binds were cut short (its
/// leader died between two members' binds) and whose bound members then finished must bind the
/// rest, not wait for a quorum it already had.
pub fn placed_members(state: &State, key: &GroupKey, except: &str) -> usize {
    state.group(key).map_or(0, |g| {
        g.members
            .iter()
            .filter(|(uid, m)| {
                *uid != except
                    && ((m.live && state.holds_room(uid, m))
                        || (m.bound && m.pod.phase == PodPhase::Succeeded))
            })
            .count()
    })
}

/// What counts towards the quorum the binds of the gang `key` wait for: its
/// [`placed_members`] other than `except`, and for a group whose members come in stages
/// ([`crate::model::PodGroup::in_stages`]) the members still to come that its placeholders
/// stand for: its members reach the extender only once admission released them, having kept
/// the placeholders' room, so a TrainJob's initializer binds into room kept for its trainer
/// nodes, which are created only once it finished.
pub fn quorum_count(state: &State, key: &GroupKey, except: &str) -> usize {
    let placed = placed_members(state, key, except);
    let kept = state
        .group(key)
        .filter(|g| g.spec.as_deref().is_some_and(|s| s.in_stages))
        .map_or(0, |g| g.owed().len());
    placed + kept
}

/// Gives up one slot of the gang's claim for a member reserved on `node`: the slot on that node
/// that holds the pod if there is one, else the smallest slot elsewhere that would have held
/// it, else the biggest slot.
fn take_slot(
    state: &mut State,
    key: &GroupKey,
    requests: &Resources,
    node: &str,
    deadline: Instant,
) {
    let Some(mut claim) = state.ledger().claims().get(key).cloned() else {
        return;
    };
    let covering = |s: &Slot| requests.fits_in(&s.requests);
    let index = claim
        .slots
        .iter()
        .position(|s| s.node == node && covering(s))
        .or_else(|| {
            claim
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| covering(s))
                .min_by_key(|(_, s)| size(&s.requests))
                .map(|(i, _)| i)
        })
        .or_else(|| {
            claim
                .slots
                .iter()
                .enumerate()
                .max_by_key(|(_, s)| size(&s.requests))
                .map(|(i, _)| i)
        });
    if let Some(i) = index {
        claim.slots.swap_remove(i);
    }
    if !covers(&claim.slots, &unplaced_shapes(state, key)) {
        // A member took a slot shaped for another: plan again at the next member's filter.
        tracing::debug!(group = %key, "gang claim no longer fits its unplaced members; planning again");
        state.ledger_mut().drop_claim(key);
        return;
    }
    claim.deadline = Some(deadline);
    state.ledger_mut().set_claim(key, claim);
}

/// The requests of the gang's members that are neither bound nor reserved, biggest first.
fn unplaced_shapes(state: &State, key: &GroupKey) -> Vec<Resources> {
    let mut shapes: Vec<Resources> = state
        .members(key)
        .filter(|p| p.node_name.is_none() && !p.phase.is_terminal())
        .filter(|p| !state.ledger().reservations().contains_key(&p.uid))
        .map(|p| p.requests.clone())
        .collect();
    shapes.sort_by_key(|r| std::cmp::Reverse(size(r)));
    shapes
}

/// Whether `slots` can hold the biggest `slots.len()` of `shapes` (biggest first), one each,
/// each in the smallest free slot that holds it.
fn covers(slots: &[Slot], shapes: &[Resources]) -> bool {
    let mut free: Vec<&Resources> = slots.iter().map(|s| &s.requests).collect();
    free.sort_by_key(|r| size(r));
    shapes.iter().take(slots.len()).all(|shape| {
        match free.iter().position(|slot| shape.fits_in(slot)) {
            Some(i) => {
                free.remove(i);
                true
            }
            None => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::testing::*;
    use crate::testing::PodBuilder;

    #[test]
    fn reserving_members_moves_the_claim_and_quorum_ends_it() {
        let mut s = cluster(2, 8);
        let key = group(&mut s, "g", 3);
        let now = Instant::now();
        let pods: Vec<Pod> = (0..3).map(|i| member(&mut s, "g", i, 2)).collect();
        run(&mut s, &pods[0], now);
        assert_eq!(s.ledger().claims()[&key].slots.len(), 3);
        let r = reserve(&mut s, "g-0", "ns/g-0", "n1", &SETTINGS, now).unwrap();
        assert_eq!(r.map(|(_, q)| q), Some(Release::Hold));
        assert_eq!(s.ledger().claims()[&key].slots.len(), 2);
        assert_eq!(s.reserved_on("n1").get("cpu"), 2000);
        reserve(&mut s, "g-1", "ns/g-1", "n1", &SETTINGS, now).unwrap();
        let r = reserve(&mut s, "g-2", "ns/g-2", "n0", &SETTINGS, now).unwrap();
        assert_eq!(r.map(|(g, q)| (g.min_member, q)), Some((3, Release::Gang)));
        assert!(
            !s.ledger().claims().contains_key(&key),
            "quorum ends the claim"
        );
        assert!(s.nodes().slots().all(|n| n.claimed.is_empty()));
    }

    #[test]
    fn a_gang_of_sub_groups_with_quorum_binds_an_instance_beyond_its_minimum_only_whole() {
        let mut s = cluster(2, 8);
        let key = group(&mut s, "g", 2);
        let mut spec = s.groups()[&key].spec.as_deref().unwrap().clone();
        spec.sub_groups = vec![crate::model::sub_groups::SubGroup {
            name: "slice".into(),
            size: 2,
            min_count: 1,
            selector: std::collections::BTreeMap::new(),
            match_label_keys: vec!["slice".into()],
            topology_key: None,
        }];
        s.apply_pod_group(spec);
        let now = Instant::now();
        for (i, slice) in ["a", "a", "b", "b"].into_iter().enumerate() {
            let pod = member(&mut s, "g", i, 1).labeled("slice", slice);
            s.apply_pod(pod);
        }
        let r = |s: &mut State, uid: &str| {
            let display = format!("ns/{uid}");
            reserve(s, uid, &display, "n0", &SETTINGS, now)
                .unwrap()
                .map(|(_, r)| r)
        };
        assert_eq!(r(&mut s, "g-0"), Some(Release::Hold));
        let at_quorum = r(&mut s, "g-1");
        assert_eq!(
            at_quorum,
            Some(Release::Members(vec!["g-0".into(), "g-1".into()]))
        );
        assert_eq!(
            r(&mut s, "g-2"),
            Some(Release::Hold),
            "slice b has one of two placed"
        );
        assert_eq!(
            r(&mut s, "g-3"),
            Some(Release::Members(
                ["g-0", "g-1", "g-2", "g-3"].map(String::from).to_vec()
            ))
        );
    }

    #[test]
    fn bind_refuses_a_pod_that_wrote_the_marker_itself_outside_any_group_or_queue() {
        let mut s = cluster(1, 8);
        s.apply_pod(Pod {
            uid: "forged".into(),
            namespace: "ns".into(),
            name: "forged".into(),
            marked: true,
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        });
        let now = Instant::now();
        let err = reserve(&mut s, "forged", "ns/forged", "n0", &SETTINGS, now).unwrap_err();
        assert!(matches!(err, Error::MarkedOutsideAnyQueue { .. }), "{err}");
        let every_pod = Settings {
            bind_unmarked: true,
            hold_scheduler_gangs: false,
            gated_admission: false,
            ..SETTINGS
        };
        assert_eq!(
            reserve(&mut s, "forged", "ns/forged", "n0", &every_pod, now),
            Ok(None),
            "with every pod sent to Gangplank, it binds every pod"
        );
    }

    #[test]
    fn bind_refuses_a_pod_still_at_the_gate() {
        let mut s = cluster(1, 8);
        s.apply_pod(Pod {
            uid: "waiting".into(),
            namespace: "ns".into(),
            name: "waiting".into(),
            queue: Some("default".into()),
            marked: true,
            scheduling_gates: vec![crate::model::names::ADMISSION_GATE.into()],
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        });
        let now = Instant::now();
        let err = reserve(&mut s, "waiting", "ns/waiting", "n0", &SETTINGS, now).unwrap_err();
        assert!(matches!(err, Error::NotAdmitted { .. }), "{err}");
        assert!(s.ledger().reservations().is_empty(), "nothing reserved");
    }

    #[test]
    fn bind_refuses_a_pod_whose_gate_someone_else_removed_and_binds_one_gangplank_admitted() {
        let mut s = cluster(1, 8);
        let pod = |uid: &str, admission_recorded| Pod {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            queue: Some("default".into()),
            marked: true,
            admission_recorded,
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        };
        s.apply_pod(pod("ungated-by-hand", false));
        s.apply_pod(pod("admitted", true));
        let gated = Settings {
            gated_admission: true,
            ..SETTINGS
        };
        let now = Instant::now();
        let err = reserve(
            &mut s,
            "ungated-by-hand",
            "ns/ungated-by-hand",
            "n0",
            &gated,
            now,
        )
        .unwrap_err();
        assert!(matches!(err, Error::GateRemovedByOther { .. }), "{err}");
        assert!(s.ledger().reservations().is_empty(), "nothing reserved");
        assert_eq!(
            reserve(&mut s, "admitted", "ns/admitted", "n0", &gated, now),
            Ok(None)
        );
        assert_eq!(
            reserve(
                &mut s,
                "ungated-by-hand",
                "ns/ungated-by-hand",
                "n0",
                &SETTINGS,
                now
            ),
            Ok(None),
            "without gates (--gate-pods=false) no pod carries the record, and none needs it"
        );
    }

    #[test]
    fn bind_refuses_a_node_the_pods_selector_does_not_select() {
        let mut s = cluster(2, 8);
        let mut zoned = s.nodes().get("n1").unwrap().as_ref().clone();
        zoned.labels.insert("zone".into(), "a".into());
        s.apply_node(zoned);
        let pod = |uid: &str| Pod {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            queue: Some("default".into()),
            marked: true,
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        };
        s.apply_pod(Pod {
            node_selector: [("zone".to_owned(), "a".to_owned())].into(),
            ..pod("zoned")
        });
        let now = Instant::now();
        let err = reserve(&mut s, "zoned", "ns/zoned", "n0", &SETTINGS, now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pod ns/zoned's spec.nodeSelector does not match node n0's labels (zone=a), so Gangplank does not bind it there"
        );
        assert_eq!(
            reserve(&mut s, "zoned", "ns/zoned", "n1", &SETTINGS, now),
            Ok(None)
        );
        assert_eq!(
            reserve(&mut s, "zoned", "ns/zoned", "unseen", &SETTINGS, now),
            Ok(None),
            "a node the watch has not shown yet is the scheduler's word"
        );
    }

    #[test]
    fn a_pod_without_the_marker_is_not_bound_unless_unmarked_binds_are_allowed() {
        let mut s = cluster(1, 8);
        let plain = Pod {
            uid: "plain".into(),
            namespace: "kube-system".into(),
            name: "plain".into(),
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        };
        s.apply_pod(plain);
        let now = Instant::now();
        let err = reserve(&mut s, "plain", "kube-system/plain", "n0", &SETTINGS, now).unwrap_err();
        assert!(matches!(err, Error::NotManaged { .. }), "{err}");
        assert!(
            err.to_string().contains("--bind-unmarked-pods=true"),
            "{err}"
        );
        let every_pod = Settings {
            bind_unmarked: true,
            hold_scheduler_gangs: false,
            gated_admission: false,
            ..SETTINGS
        };
        let bound = reserve(&mut s, "plain", "kube-system/plain", "n0", &every_pod, now);
        assert_eq!(bound, Ok(None), "a pod in no group is bound at once");
    }

    #[test]
    fn a_bound_pod_or_another_pod_under_the_uid_is_refused_and_nothing_is_reserved() {
        let mut s = cluster(2, 8);
        group(&mut s, "g", 2);
        let mut bound = member(&mut s, "g", 0, 2);
        bound.node_name = Some("n1".into());
        s.apply_pod(bound);
        member(&mut s, "g", 1, 2);
        let now = Instant::now();
        let err = reserve(&mut s, "g-0", "ns/g-0", "n0", &SETTINGS, now).unwrap_err();
        assert_eq!(err.to_string(), "pod ns/g-0 is already bound to node n1");
        let err = reserve(&mut s, "g-1", "kube-system/victim", "n0", &SETTINGS, now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "UID g-1 is the UID of pod ns/g-1, not of pod kube-system/victim"
        );
        assert!(s.ledger().reservations().is_empty());
    }

    #[test]
    fn release_forgets_reservations_and_the_claim() {
        let mut s = cluster(2, 8);
        let key = group(&mut s, "g", 3);
        let now = Instant::now();
        let p = member(&mut s, "g", 0, 2);
        member(&mut s, "g", 1, 2);
        run(&mut s, &p, now);
        reserve(&mut s, "g-0", "ns/g-0", "n0", &SETTINGS, now).unwrap();
        release(&mut s, &key, &["g-0".into()]);
        assert!(
            s.nodes()
                .slots()
                .all(|n| n.reserved.is_empty() && n.claimed.is_empty())
        );
        assert!(s.ledger().reservations().is_empty());
    }

    #[test]
    fn the_first_stage_of_a_group_in_stages_binds_into_the_room_kept_for_the_later_ones() {
        for in_stages in [true, false] {
            let mut s = cluster(2, 32);
            let group = PodGroup {
                schedule_timeout: std::time::Duration::from_secs(30),
                min_resources: Resources::from([("cpu", 33_000)]),
                ahead: true,
                in_stages,
                ..crate::testing::pod_group("train", 5, "default")
            };
            let key = group.key.clone();
            s.apply_pod_group(group);
            let now = Instant::now();
            let initializer = member(&mut s, "train", 0, 1);
            assert!(!run(&mut s, &initializer, now).passed.is_empty());
            let (_, quorum) = reserve(&mut s, "train-0", "ns/train-0", "n0", &SETTINGS, now)
                .unwrap()
                .unwrap();
            assert_eq!(
                (quorum_count(&s, &key, ""), quorum),
                if in_stages {
                    (5, Release::Gang)
                } else {
                    (1, Release::Hold)
                },
                "in stages: {in_stages}"
            );
        }
    }

    #[test]
    fn members_that_succeeded_count_towards_quorum_and_failed_ones_do_not() {
        let mut s = cluster(2, 4);
        let key = group(&mut s, "g", 3);
        for (i, phase) in [PodPhase::Succeeded, PodPhase::Failed]
            .into_iter()
            .enumerate()
        {
            let mut done = member(&mut s, "g", i, 1);
            done.node_name = Some("n0".into());
            done.phase = phase;
            s.apply_pod(done);
        }
        assert_eq!(placed_members(&s, &key, ""), 1);
    }

    #[test]
    fn the_rest_of_a_gang_whose_bound_members_already_succeeded_reaches_quorum_without_them_running()
     {
        let mut s = cluster(2, 4);
        let key = group(&mut s, "g", 4);
        for i in 0..2 {
            let mut done = member(&mut s, "g", i, 1);
            done.node_name = Some("n0".into());
            done.phase = PodPhase::Succeeded;
            s.apply_pod(done);
        }
        let now = Instant::now();
        let third = member(&mut s, "g", 2, 1);
        run(&mut s, &third, now);
        let (_, quorum) = reserve(&mut s, "g-2", "ns/g-2", "n1", &SETTINGS, now)
            .unwrap()
            .unwrap();
        assert_eq!(
            quorum,
            Release::Hold,
            "two succeeded and one reserved make three of four"
        );
        let fourth = member(&mut s, "g", 3, 1);
        run(&mut s, &fourth, now);
        let (_, quorum) = reserve(&mut s, "g-3", "ns/g-3", "n1", &SETTINGS, now)
            .unwrap()
            .unwrap();
        assert_eq!(
            quorum,
            Release::Gang,
            "two succeeded and two reserved make four"
        );
        assert!(!s.ledger().claims().contains_key(&key));
    }
}
