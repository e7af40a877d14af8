//! The event loop of a simulation ([`run`]): arrivals, ends and deletions in virtual time, to
//! the millisecond; after the events of an instant, admission passes until one changes nothing,
//! each followed by reclaim's evictions and the placement of the pods it released. As the
//! admission loop, passes run at most every [`MIN_PASS_INTERVAL`]: the events that come before
//! the next pass may run are handled first, each at its own time. The core reads whole seconds
//! (`now` of a pass, the pods' times) and so does the [`Outcome`]; the ledger's deadlines keep
//! the milliseconds.
//!
//! Placement stands in for the stock scheduler calling the extender: a released pod's
//! candidates are the nodes that take it and have room for it (the scheduler's own filter),
//! narrowed by [`claims::filter`], scored by [`claims::scores`] (highest wins, ties to the
//! first node by name), and reserved with [`claims::reserve`]; a gang's members are bound
//! together once it reaches quorum, as held binds are, at most [`Setup::binds_per_second`] a
//! second. Evicted gangs start again from the gate with new pods, as their controllers make
//! them; each member ends after its own runtime.
//!
//! The run owns its [`State`]: the loop is its one writer, shared with no one.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::outcome::{JobOutcome, Outcome, QueueSample, Sample};
use super::{Job, Setup, millis_of, second_of};
use crate::admit::groups::Unshown;
use crate::admit::plan::{self, Decision, Hold};
use crate::admit::{Evicting, MIN_PASS_INTERVAL, Passed, after_pass, pass};
use crate::claims::{self, Release};
use crate::model::names::ADMISSION_GATE;
use crate::model::{GroupKey, Pod, PodGroup, PodPhase, Queue, Resources, State};
use crate::policy::constraints;

/// Passes run at one instant before the loop moves on, however much each changes.
const MAX_PASSES_AT_ONCE: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrive(usize),
    /// A member pod (by its serial number) ends its runtime.
    MemberEnd(u64),
    Delete(usize),
    /// A time-based condition (a `maxWaitSeconds`) may have changed a pass's answer, or
    /// released pods wait for the scheduler's next second.
    Wake,
}

/// How far a job has got in the run.
#[derive(Debug, Default)]
struct Progress {
    /// Its live pods' UIDs, by member index.
    pods: Vec<Option<String>>,
    /// Its current attempt has started (reached quorum).
    running: bool,
    over: bool,
}

/// A time of virtual time in milliseconds, as the engine keeps it.
type Millis = i64;

struct Sim<'a> {
    jobs: &'a [Job],
    state: State,
    setup: &'a Setup,
    settings: claims::Settings,
    events: BinaryHeap<Reverse<(Millis, u64, Event)>>,
    seq: u64,
    progress: Vec<Progress>,
    out: Outcome,
    /// The job each live pod belongs to, and its member index.
    owner: FxHashMap<String, (usize, usize)>,
    /// Released pods the scheduler has not placed yet, in release order.
    unplaced: Vec<String>,
    /// Gang members reserved on a node and held until their gang reaches quorum.
    held_binds: FxHashMap<GroupKey, Vec<(String, String)>>,
    held: Option<Hold>,
    /// The latest pass's decision, for samples.
    latest: Option<Decision>,
    next_sample: i64,
    pod_counter: u64,
    /// The second the scheduler's budget is for, and the placements left in it.
    budget: (i64, u32),
    /// The nodes that take new pods, by name: a run never changes its nodes, so the list the
    /// scheduler's filter walks for each pod is made once.
    schedulable: Vec<String>,
}

/// Replays `jobs` on `setup`'s cluster; see the module docs.
pub fn run(setup: &Setup, jobs: &[Job]) -> Outcome {
    let mut state = State::default();
    for node in &setup.nodes {
        state.apply_node(node.clone());
    }
    // By name: where the core breaks a tie by the order of its queue map, a configuration
    // that lists the same queues in another order replays the same.
    let mut queues: Vec<&Queue> = setup.queues.iter().collect();
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    for queue in queues {
        state.apply_queue(queue.clone());
    }
    let capacity = state.schedulable_capacity();
    let schedulable = state
        .schedulable_nodes()
        .into_iter()
        .map(|n| n.name.clone())
        .collect();
    let mut sim = Sim {
        jobs,
        state,
        setup,
        settings: setup.settings,
        events: BinaryHeap::with_capacity(jobs.len() * 2),
        seq: 0,
        progress: (0..jobs.len()).map(|_| Progress::default()).collect(),
        out: Outcome {
            jobs: vec![JobOutcome::default(); jobs.len()],
            capacity,
            ..Outcome::default()
        },
        owner: FxHashMap::default(),
        unplaced: Vec::new(),
        held_binds: FxHashMap::default(),
        held: None,
        latest: None,
        next_sample: 0,
        pod_counter: 0,
        budget: (i64::MIN, 0),
        schedulable,
    };
    for (j, job) in jobs.iter().enumerate() {
        sim.at(job.arrival_ms, Event::Arrive(j));
        if let Some(at) = job.deleted_at_ms {
            sim.at(at, Event::Delete(j));
        }
        let max_wait = sim.state.queues().get(&job.queue).and_then(|q| q.max_wait);
        if let Some(max_wait) = max_wait {
            let ms = i64::try_from(max_wait.as_millis()).unwrap_or(i64::MAX / 2);
            sim.at(
                job.arrival_ms.saturating_add(ms).saturating_add(1_000),
                Event::Wake,
            );
        }
    }
    let interval = i64::try_from(MIN_PASS_INTERVAL.as_millis()).unwrap_or(100);
    let mut last_pass: Option<Millis> = None;
    while let Some(Reverse((first, _, event))) = sim.events.pop() {
        sim.handle(event, first);
        let now = last_pass.map_or(first, |last| first.max(last.saturating_add(interval)));
        while let Some(Reverse((at, _, next))) = sim.events.peek().copied() {
            if at > now {
                break;
            }
            sim.events.pop();
            sim.handle(next, at);
        }
        sim.passes(now);
        sim.sample(now);
        sim.out.end = second_of(now);
        last_pass = Some(now);
    }
    sim.out
}

impl Sim<'_> {
    fn at(&mut self, time: Millis, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((time, self.seq, event)));
    }

    fn instant(&self, now: Millis) -> Instant {
        self.setup.origin + Duration::from_millis(now.max(0).unsigned_abs())
    }

    fn handle(&mut self, event: Event, now: Millis) {
        self.out.events += 1;
        match event {
            Event::Arrive(j) => self.arrive(j, now),
            Event::MemberEnd(serial) => self.member_end(&uid_of(serial), now),
            Event::Delete(j) => {
                if !self.progress[j].over {
                    self.out.jobs[j].deleted = Some(second_of(now));
                    self.remove(j);
                }
            }
            Event::Wake => {}
        }
    }

    /// The job's PodGroup (for a gang) and its pods, gated, as its controller creates them.
    fn arrive(&mut self, j: usize, now: Millis) {
        let job = &self.jobs[j];
        if self.progress[j].over {
            return;
        }
        if job.gang {
            let mut group = PodGroup::new(
                GroupKey::new(job.namespace.as_str(), job.name.as_str()),
                job.min_member.max(1),
                job.queue.clone(),
            );
            group.created = second_of(now);
            group.expected_runtime = job.expected_runtime;
            group.sub_groups = job.sub_groups.clone();
            self.state.apply_pod_group(group);
        }
        for i in 0..job.members.len() {
            self.create_pod(j, i, now);
        }
    }

    fn create_pod(&mut self, j: usize, index: usize, now: Millis) {
        let job = &self.jobs[j];
        self.pod_counter += 1;
        let uid = uid_of(self.pod_counter);
        let pod = Pod {
            uid: uid.clone(),
            namespace: job.namespace.clone(),
            name: format!("{}-{index}", job.name),
            requests: job.members[index].clone(),
            pod_group: job.gang.then(|| job.name.clone()),
            labels: job.labels.get(index).cloned().unwrap_or_default(),
            queue: Some(job.queue.clone()),
            priority: job.priority,
            scheduling_gates: vec![ADMISSION_GATE.to_owned()],
            created: second_of(now),
            marked: true,
            ..Pod::default()
        };
        self.state.apply_pod(pod);
        self.owner.insert(uid.clone(), (j, index));
        let pods = &mut self.progress[j].pods;
        if pods.len() <= index {
            pods.resize(index + 1, None);
        }
        pods[index] = Some(uid);
    }

    /// A member ran its runtime: it succeeded; a job with none of its members running and
    /// its quorum succeeded has finished.
    fn member_end(&mut self, uid: &str, now: Millis) {
        let Some(&(j, _)) = self.owner.get(uid) else {
            return;
        };
        let Some(pod) = self.state.pods().get(uid) else {
            return;
        };
        if pod.node_name.is_none() || pod.phase != PodPhase::Running {
            return;
        }
        let mut done = Pod::clone(pod);
        done.phase = PodPhase::Succeeded;
        self.state.apply_pod(done);
        let (mut running, mut succeeded) = (0, 0);
        for uid in self.progress[j].pods.iter().flatten() {
            match self.state.pods().get(uid).map(|p| p.phase) {
                Some(PodPhase::Running) => running += 1,
                Some(PodPhase::Succeeded) => succeeded += 1,
                _ => {}
            }
        }
        if running == 0 && succeeded >= self.jobs[j].min_member.max(1) {
            self.out.jobs[j].finished = Some(second_of(now));
            self.remove(j);
        }
    }

    /// Ends the job: its pods and PodGroup deleted.
    fn remove(&mut self, j: usize) {
        let progress = &mut self.progress[j];
        progress.over = true;
        progress.running = false;
        for uid in std::mem::take(&mut progress.pods).into_iter().flatten() {
            self.state.delete_pod(&uid);
            self.owner.remove(&uid);
        }
        let job = &self.jobs[j];
        if job.gang {
            let key = GroupKey::new(job.namespace.as_str(), job.name.as_str());
            self.held_binds.remove(&key);
            self.state.delete_pod_group(&key);
        }
    }

    /// Admission passes at `now` until one releases, evicts and places nothing.
    fn passes(&mut self, now: Millis) {
        for _ in 0..MAX_PASSES_AT_ONCE {
            let released = self.pass(now);
            let placed = self.place(now);
            if !released && !placed {
                break;
            }
        }
    }

    /// One pass: decide, plan reclaim, record what the pass leaves in the ledger, release the
    /// admitted pods and carry out the evictions. Whether it changed anything.
    fn pass(&mut self, now: Millis) -> bool {
        self.out.passes += 1;
        let Passed { decision, reclaims } = pass(
            &self.state,
            Unshown::none(),
            Evicting::none(),
            second_of(now),
        );
        let at = self.instant(now);
        after_pass::record(&mut self.state, self.held.as_ref(), &decision, at);
        self.held.clone_from(&decision.hold);
        for waiting in &decision.waiting {
            let job = match &waiting.pod {
                Some(pod) => self.owner.get(&pod.uid),
                None => self.job_of_group(&waiting.group),
            };
            if let Some(&(j, _)) = job {
                self.out.jobs[j].why = Some(waiting.why.to_string());
            }
        }
        let mut changed = false;
        let admitted = decision.admit.iter().flat_map(|a| &a.pods);
        for pod in admitted.chain(&decision.into_kept_room) {
            changed |= self.release(pod, now);
        }
        for reclaim in &reclaims.reclaims {
            for victim in &reclaim.victims {
                changed = true;
                let uids: Vec<String> = victim.pods.iter().map(|p| p.uid.clone()).collect();
                self.evict(&uids, victim.whole, now);
            }
        }
        self.latest = Some(decision);
        changed
    }

    fn job_of_group(&self, key: &GroupKey) -> Option<&(usize, usize)> {
        self.state
            .members(key)
            .next()
            .and_then(|pod| self.owner.get(&pod.uid))
    }

    /// Removes Gangplank's gate from the pod, as the admission loop's patch does.
    fn release(&mut self, pod: &plan::PodRef, now: Millis) -> bool {
        let Some(seen) = self.state.pods().get(&pod.uid) else {
            return false;
        };
        if !seen.awaits_admission() {
            return false;
        }
        let mut released = Pod::clone(seen);
        released.scheduling_gates.retain(|g| g != ADMISSION_GATE);
        released.admission_recorded = true;
        if let Some(selector) = &pod.node_selector {
            released.node_selector.clone_from(selector);
        }
        self.state.apply_pod(released);
        self.unplaced.push(pod.uid.clone());
        if let Some(&(j, _)) = self.owner.get(&pod.uid) {
            let job = &mut self.out.jobs[j];
            if job.admitted.is_none() {
                job.admitted = Some(second_of(now));
                self.out.admission_order.push(j);
            }
        }
        true
    }

    /// Evicts `uids` (a gang `whole`, or its elastic members): each is deleted and made again
    /// behind the gate, as its controller does; a gang evicted whole starts over.
    fn evict(&mut self, uids: &[String], whole: bool, now: Millis) {
        let Some(&(j, _)) = uids.first().and_then(|u| self.owner.get(u)) else {
            return;
        };
        if whole {
            self.progress[j].running = false;
            self.out.jobs[j].evictions += 1;
            let job = &self.jobs[j];
            if job.gang {
                self.held_binds
                    .remove(&GroupKey::new(job.namespace.as_str(), job.name.as_str()));
            }
        }
        for uid in uids {
            let Some((_, index)) = self.owner.remove(uid) else {
                continue;
            };
            self.out.jobs[j].evicted_pods += 1;
            self.state.delete_pod(uid);
            self.unplaced.retain(|u| u != uid);
            self.create_pod(j, index, now);
        }
    }

    /// Places what it can of the released pods, within the scheduler's throughput (the rest
    /// go on in the next second); whether any was placed.
    fn place(&mut self, now: Millis) -> bool {
        if self.budget.0 != second_of(now) {
            self.budget = (
                second_of(now),
                self.setup.binds_per_second.unwrap_or(u32::MAX),
            );
        }
        let mut placed = false;
        let mut deferred = false;
        for uid in std::mem::take(&mut self.unplaced) {
            if self.budget.1 == 0 {
                deferred = true;
            } else if self.schedule(&uid, now) {
                self.budget.1 -= 1;
                placed = true;
                continue;
            }
            if self.state.pods().contains_key(&uid) {
                self.unplaced.push(uid);
            }
        }
        if deferred {
            self.at(millis_of(second_of(now) + 1), Event::Wake);
        }
        placed
    }

    /// One scheduling cycle for `uid`: see the module docs. Whether it was placed.
    fn schedule(&mut self, uid: &str, now: Millis) -> bool {
        let Some(pod) = self.state.pods().get(uid).cloned() else {
            return false;
        };
        // The member's own constraints (a trace row's GPU models), and the domain admission
        // pinned it to.
        let mut constraints = self
            .owner
            .get(uid)
            .and_then(|&(j, index)| self.jobs[j].constraints_of(index))
            .cloned()
            .unwrap_or_default();
        constraints.node_selector.extend(
            pod.node_selector
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        constraints.node_selector.sort();
        // The scheduler's own filter: the node takes the pod and has room for it, counting
        // what is bound and reserved there (`State::free_on`: a slot's `free` leaves out the
        // gang claims too, which the extender's filter weighs instead), without allocating.
        let nodes = self.state.nodes();
        let candidates: Vec<&str> = self
            .schedulable
            .iter()
            .filter(|name| {
                nodes.slot(name).is_some_and(|slot| {
                    slot.node.as_ref().is_some_and(|node| {
                        constraints::feasible(node, &constraints).is_ok()
                            && pod.requests.fits_in_with(&slot.free, &slot.claimed)
                    })
                })
            })
            .map(String::as_str)
            .collect();
        if candidates.is_empty() {
            return false;
        }
        let at = self.instant(now);
        let passed: Vec<&str> = match claims::filter(
            &mut self.state,
            &pod,
            &constraints,
            &candidates,
            &self.settings,
            at,
        ) {
            Ok(verdict) => verdict.passed,
            Err(_) => return false,
        };
        let scores = claims::scores(&self.state, &pod, &passed, self.settings.strategy, 0);
        let Some(best) = scores.iter().max() else {
            return false;
        };
        let node = passed[scores.iter().position(|s| s == best).unwrap_or(0)].to_owned();
        let display = format!("{}/{}", pod.namespace, pod.name);
        match claims::reserve(&mut self.state, uid, &display, &node, &self.settings, at) {
            Ok(None) => self.bind(&[(uid.to_owned(), node)], now),
            Ok(Some((group, Release::Gang))) => {
                let mut binds = self.held_binds.remove(&group.key).unwrap_or_default();
                binds.push((uid.to_owned(), node));
                self.bind(&binds, now);
            }
            Ok(Some((group, Release::Members(uids)))) => {
                let held = self.held_binds.entry(group.key).or_default();
                let (mut binds, kept) = std::mem::take(held)
                    .into_iter()
                    .partition(|(held, _)| uids.contains(held));
                *held = kept;
                binds.push((uid.to_owned(), node));
                self.bind(&binds, now);
            }
            Ok(Some((group, Release::Hold))) => {
                self.held_binds
                    .entry(group.key)
                    .or_default()
                    .push((uid.to_owned(), node));
            }
            Err(_) => return false,
        }
        true
    }

    /// Binds each (pod, node): the pods run from `now`; a job whose first member this binds
    /// has started.
    fn bind(&mut self, binds: &[(String, String)], now: Millis) {
        for (uid, node) in binds {
            let Some(seen) = self.state.pods().get(uid) else {
                continue;
            };
            let mut bound = Pod::clone(seen);
            bound.node_name = Some(node.clone());
            bound.phase = PodPhase::Running;
            bound.started = Some(second_of(now));
            self.state.apply_pod(bound);
            let Some(&(j, index)) = self.owner.get(uid) else {
                continue;
            };
            let end = now.saturating_add(self.jobs[j].runtime_ms_of(index).max(0));
            if let Some(serial) = serial_of(uid) {
                self.at(end, Event::MemberEnd(serial));
            }
            if !self.progress[j].running {
                self.progress[j].running = true;
                self.out.jobs[j].started.get_or_insert(second_of(now));
            }
        }
    }

    /// Records the queues as the latest pass saw them, once per `sample_every`.
    fn sample(&mut self, now: Millis) {
        let now = second_of(now);
        if now < self.next_sample {
            return;
        }
        let every = self.setup.sample_every.max(1);
        self.next_sample = (now / every + 1) * every;
        let Some(decision) = &self.latest else {
            return;
        };
        let queues = decision
            .queues
            .iter()
            .map(|(name, report)| QueueSample {
                queue: Arc::from(name.as_str()),
                allocated: report.allocated.clone(),
                deserved: report.deserved.clone(),
                waiting: report.waiting_groups,
            })
            .collect();
        let mut used = Resources::new();
        for pod in self.state.pods().values() {
            if pod.node_name.is_some() && !pod.phase.is_terminal() {
                used.add(&pod.requests);
            }
        }
        self.out.samples.push(Sample {
            at: now,
            queues,
            used,
        });
    }
}

/// The UID of the simulation's `serial`th pod.
fn uid_of(serial: u64) -> String {
    format!("sim-{serial}")
}

fn serial_of(uid: &str) -> Option<u64> {
    uid.strip_prefix("sim-")?.parse().ok()
}
