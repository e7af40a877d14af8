//! The one placement model every "does this gang fit" question uses: the members biggest first
//! ([`size`]: GPUs, then CPU, then memory), each on the first node, in name order, that has
//! room for it. The admission pass's room, reclaim's search and the claims' check against
//! empty nodes all place through [`first_fit`] (or, for the pass's many groups, through a scan
//! that finds the same nodes faster), so reclaim never evicts for a group that admission then
//! does not place. Claims choose among the nodes a member fits on by the placement strategy
//! instead ([`crate::claims`]), in the same member order.

use std::cmp::Reverse;

use rustc_hash::FxHashMap;

use crate::model::{ResourceId, Resources};

/// A member's size for ordering: GPUs dominate, then CPU, then memory.
pub fn size(r: &Resources) -> (i64, i64, i64) {
    (
        r.amount(ResourceId::GPU),
        r.amount(ResourceId::CPU),
        r.amount(ResourceId::MEMORY),
    )
}

/// `pods`, biggest first ([`size`]); pods of equal size keep their order.
pub fn biggest_first<'a>(pods: impl IntoIterator<Item = &'a Resources>) -> Vec<&'a Resources> {
    let mut pods: Vec<&Resources> = pods.into_iter().collect();
    pods.sort_by_key(|r| Reverse(size(r)));
    pods
}

/// Where each pod of `need` goes, in [`biggest_first`] order, on the first node of `free` with
/// room left for it: `(node, pod)` pairs, `free` unchanged. Or how many were placed before the
/// first pod that finds no node, and that pod.
pub fn first_fit<'a>(
    free: &[Resources],
    need: impl IntoIterator<Item = &'a Resources>,
) -> Result<Vec<(usize, &'a Resources)>, (usize, &'a Resources)> {
    let pods = biggest_first(need);
    // What the pods placed so far take, per node they went to.
    let mut taken: FxHashMap<usize, Resources> = FxHashMap::default();
    let mut out = Vec::with_capacity(pods.len());
    // The previous pod and its node: a pod of the same requests (a gang's members mostly are)
    // fits on none of the nodes before that one, as placing pods only takes room.
    let mut previous: Option<(&Resources, usize)> = None;
    for pod in pods {
        let start = match previous {
            Some((shape, at)) if shape == pod => at,
            _ => 0,
        };
        let found = (start..free.len()).find(|at| match taken.get(at) {
            Some(t) => pod.fits_in_after(&free[*at], t),
            None => pod.fits_in(&free[*at]),
        });
        let Some(at) = found else {
            return Err((out.len(), pod));
        };
        previous = Some((pod, at));
        taken.entry(at).or_default().add(pod);
        out.push((at, pod));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cpu: i64, gib: i64) -> Resources {
        Resources::from([("cpu", cpu * 1_000), ("memory", gib << 30)])
    }

    #[test]
    fn members_go_biggest_first_by_gpus_then_cpu_then_memory() {
        let small = pod(2, 2);
        let more_memory = pod(2, 6);
        let gpu = Resources::from([("cpu", 1_000), ("nvidia.com/gpu", 1)]);
        let order = biggest_first([&small, &more_memory, &gpu]);
        assert_eq!(order, vec![&gpu, &more_memory, &small]);
    }

    #[test]
    fn each_member_takes_the_first_node_with_room_left_for_it() {
        // Memory first: the 6 GiB member takes n0, the 2 GiB one still fits on n1. Placed
        // in the order given, the small one would take n0 and the big one find no node.
        let free = vec![pod(4, 6), pod(2, 2)];
        let need = [pod(2, 2), pod(2, 6)];
        let placed = first_fit(&free, &need).unwrap();
        assert_eq!(placed, vec![(0, &need[1]), (1, &need[0])]);
    }

    #[test]
    fn a_gang_that_does_not_fit_names_the_first_member_without_a_node() {
        let free = vec![pod(4, 8)];
        let need = [pod(2, 2), pod(2, 2), pod(2, 2)];
        assert_eq!(first_fit(&free, &need), Err((2, &need[2])));
    }
}
