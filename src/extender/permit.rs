//! Bind as Permit: hold each gang member's bind call until the gang has quorum.
//!
//! The scheduler calls bind from its asynchronous binding goroutine after *assuming* the pod on
//! the node, so a held call blocks nothing but that pod, and the pod's resources stay reserved
//! in the scheduler's cache meanwhile. For a member of a gang without quorum the call is held
//! (a reservation is recorded in the cache, see [`gangplank_core::claims::reserve`]); when
//! reserved plus bound members reach `minMember`, every held member and this one are bound
//! together and all calls answered. The gang's timeout (the PodGroup's `scheduleTimeoutSeconds`,
//! capped by `--max-bind-hold-seconds`) counts from its latest member placed, as its claim's
//! does ([`gangplank_core::claims`]): a gang whose members keep arriving, however far apart
//! in the scheduler's queue (a scheduler started on a backlog takes pods in no gang order), is
//! not given up while it progresses. No call is held longer than `--max-bind-hold-seconds`
//! from the gang's first held call, which must stay below the scheduler's `httpTimeout`. At
//! either limit every held call is answered with an `Error` saying how many members were
//! placed out of how many: the scheduler forgets those pods, frees their room and retries them
//! with backoff. Nothing is bound until quorum. A restart loses held
//! calls: the scheduler sees them fail and retries. Kubernetes binds one pod per request, so a
//! process killed while it sends a gang's Bindings leaves it bound in part until the scheduler
//! places the rest again; members that succeeded meanwhile still count towards quorum
//! ([`gangplank_core::claims::placed_members`]).
//!
//! A held call belongs to the scheduler that made it. When that scheduler goes away (it
//! restarted, or its connection dropped), the server drops the call's handler, and the call
//! stops counting: its reservation is released before the next bind call's step, and within a
//! second by the claim-expiry timer when no call comes ([`super::expiry`]), so a gang never completes on
//! placements made by a scheduler that is gone (they were checked against constraints
//! Gangplank does not track, such as host ports, and the new scheduler knows nothing of them).
//!
//! A gang of sub-groups (a PodGroup's `subGroupPolicy`) binds by whole instances once it has
//! quorum: a member beyond its minimum is held until every member of its instance is placed
//! ([`gangplank_core::claims::Release`]), and the minimum's instances, all placed at quorum,
//! bind together.
//!
//! Pods in no group, other members beyond quorum, and members of a gang the stock scheduler places
//! whole itself (a Workload API PodGroup's, [`PodGroup::placed_whole_by_scheduler`]: its
//! PodGroup cycle sends the binds only once every member passed its Permit) are bound at once;
//! `--hold-workload-api-gang-binds` holds the last kind too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{BindRequest, Binder, Error};
use crate::cache::LedgerWriter;
use crate::metrics;
use gangplank_core::claims::{Release, Settings};
use gangplank_core::model::{GroupKey, PodGroup};

/// Holds gang members' bind calls until quorum; see the module docs.
pub struct Permits {
    ledger: LedgerWriter,
    binder: Arc<dyn Binder>,
    settings: Settings,
    waiting: Mutex<HashMap<GroupKey, Waiting>>,
}

struct Waiting {
    /// When the first of the held calls arrived.
    since: Instant,
    /// When the latest arrived.
    latest: Instant,
    held: Vec<Held>,
}

impl Waiting {
    /// When the held calls are answered with an error if quorum has not come: the gang's
    /// timeout after its latest member placed, or `max_hold` after the first, whichever is
    /// sooner.
    fn deadline(&self, timeout: Duration, max_hold: Duration) -> Instant {
        (self.latest + timeout).min(self.since + max_hold)
    }
}

struct Held {
    request: BindRequest,
    reply: oneshot::Sender<Result<(), Error>>,
}

/// What [`Permits::step`] decided for one bind call.
enum Step {
    Failed(Error),
    /// A pod in no group: bind it now.
    Alone(BindRequest),
    /// The gang has quorum, or is one whose binds are not held: bind `held` (held since
    /// `since`) and `request` together.
    Quorum {
        group: PodGroup,
        since: Option<Instant>,
        held: Vec<Held>,
        request: BindRequest,
    },
    /// Held until `deadline` (or later, if more members arrive); `answer` gets the result.
    Held {
        group: PodGroup,
        uid: String,
        deadline: Instant,
        answer: oneshot::Receiver<Result<(), Error>>,
    },
}

/// Takes the held calls of `uids` out of the gang `key`'s (a gang of sub-groups binding the
/// instances placed whole, [`Release::Members`]); the others stay held. Returns since when
/// the first of them was held, if any was.
fn take_held(
    waiting: &mut HashMap<GroupKey, Waiting>,
    key: &GroupKey,
    uids: &[String],
) -> (Option<Instant>, Vec<Held>) {
    let Some(gang) = waiting.get_mut(key) else {
        return (None, Vec::new());
    };
    let (taken, kept): (Vec<Held>, Vec<Held>) = std::mem::take(&mut gang.held)
        .into_iter()
        .partition(|h| uids.contains(&h.request.uid));
    let since = (!taken.is_empty()).then_some(gang.since);
    gang.held = kept;
    if gang.held.is_empty() {
        waiting.remove(key);
    }
    (since, taken)
}

/// What [`Permits::time_out`] found when a held call's deadline came.
enum Expiry {
    /// The gang timed out; this call's answer.
    Failed(Result<(), Error>),
    /// More members arrived meanwhile: wait until then.
    Later(Instant),
    /// Another path (quorum, shutdown) took the call: its answer comes on the channel.
    Taken,
}

impl Permits {
    pub fn new(ledger: LedgerWriter, binder: Arc<dyn Binder>, settings: Settings) -> Self {
        Self {
            ledger,
            binder,
            settings,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Binds `request`, or holds it until its gang has quorum; see the module docs.
    pub async fn bind(&self, request: BindRequest) -> Result<(), Error> {
        match self.step(request) {
            Step::Failed(e) => Err(e),
            Step::Alone(request) => self.binder.bind(&request).await,
            Step::Quorum {
                group,
                since,
                held,
                request,
            } => self.bind_gang(&group, since, held, request).await,
            Step::Held {
                group,
                uid,
                mut deadline,
                mut answer,
            } => loop {
                if let Ok(result) = tokio::time::timeout_at(deadline, &mut answer).await {
                    return result.unwrap_or(Err(Error::Dropped));
                }
                match self.time_out(&group, &uid) {
                    Expiry::Failed(result) => return result,
                    Expiry::Later(later) => deadline = later,
                    Expiry::Taken => return answer.await.unwrap_or(Err(Error::Dropped)),
                }
            },
        }
    }

    /// Records the reservation and, in the same critical section, holds the call or takes the
    /// gang's held calls for binding.
    ///
    /// Why one section: were the reservation recorded first and the call held after, a second
    /// member's call in between would see quorum, find no held call to take, and bind alone,
    /// and the first would then wait for a quorum that already came (a gang bound in part; seen
    /// in the end-to-end suite). The order is always this lock, then the cache's.
    fn step(&self, request: BindRequest) -> Step {
        let display = format!("{}/{}", request.namespace, request.name);
        let mut waiting = self.lock();
        self.drop_abandoned(&mut waiting);
        let reserved = self.ledger.reserve(
            &request.uid,
            &display,
            &request.node,
            &self.settings,
            Instant::now().into_std(),
        );
        let step = match reserved {
            Err(e) => Step::Failed(request.failed(e.to_string())),
            Ok(None) => Step::Alone(request),
            Ok(Some((group, Release::Gang))) => {
                let taken = waiting.remove(&group.key);
                let (since, held) = taken.map_or((None, Vec::new()), |w| (Some(w.since), w.held));
                Step::Quorum {
                    group,
                    since,
                    held,
                    request,
                }
            }
            Ok(Some((group, Release::Members(uids)))) => {
                let (since, held) = take_held(&mut waiting, &group.key, &uids);
                Step::Quorum {
                    group,
                    since,
                    held,
                    request,
                }
            }
            Ok(Some((group, Release::Hold))) if !self.settings.holds_binds_of(&group) => {
                Step::Quorum {
                    group,
                    since: None,
                    held: Vec::new(),
                    request,
                }
            }
            Ok(Some((group, Release::Hold))) => {
                let (reply, answer) = oneshot::channel();
                let uid = request.uid.clone();
                let now = Instant::now();
                let entry = waiting.entry(group.key.clone()).or_insert_with(|| Waiting {
                    since: now,
                    latest: now,
                    held: Vec::new(),
                });
                entry.latest = now;
                // A retried call for the same pod replaces the one the scheduler gave up on.
                if let Some(i) = entry.held.iter().position(|h| h.request.uid == uid) {
                    let old = entry.held.swap_remove(i);
                    let _ = old
                        .reply
                        .send(Err(old.request.failed("superseded by a newer bind call")));
                }
                entry.held.push(Held { request, reply });
                Step::Held {
                    deadline: entry.deadline(self.settings.timeout(&group), self.settings.max_hold),
                    group,
                    uid,
                    answer,
                }
            }
        };
        set_held_gauge(waiting.values().map(|w| w.held.len()).sum());
        step
    }

    /// Drops the held calls whose caller went away and releases their reservations: the
    /// claim-expiry timer's call ([`super::expiry`]), so that they do not hold room until the
    /// next bind call comes.
    pub fn forget_abandoned(&self) {
        let mut waiting = self.lock();
        self.drop_abandoned(&mut waiting);
        set_held_gauge(waiting.values().map(|w| w.held.len()).sum());
    }

    /// Drops the held calls whose caller went away (their answer's receiver is gone) and
    /// releases their reservations, so they count toward no quorum.
    fn drop_abandoned(&self, waiting: &mut HashMap<GroupKey, Waiting>) {
        let mut abandoned: Vec<String> = Vec::new();
        waiting.retain(|key, w| {
            w.held.retain(|h| {
                let gone = h.reply.is_closed();
                if gone {
                    tracing::info!(group = %key, pod = %h.request.name, "held bind abandoned by its caller; it no longer counts toward quorum");
                    abandoned.push(h.request.uid.clone());
                }
                !gone
            });
            !w.held.is_empty()
        });
        if !abandoned.is_empty() {
            self.ledger.release(&abandoned);
            ::metrics::counter!(metrics::GANG_BINDS_ABANDONED_TOTAL)
                .increment(abandoned.len() as u64);
        }
    }

    /// Answers every held call with an error, for shutdown: the scheduler frees the pods at
    /// once instead of waiting for its `httpTimeout`.
    pub fn fail_all(&self, why: &str) {
        let mut waiting = self.lock();
        for (key, waiting) in waiting.drain() {
            let uids: Vec<String> = waiting.held.iter().map(|h| h.request.uid.clone()).collect();
            self.ledger.release_gang(&key, &uids);
            for held in waiting.held {
                let _ = held.reply.send(Err(held.request.failed(why)));
            }
        }
        set_held_gauge(0);
    }

    /// Calls currently held whose caller still waits for the answer.
    pub fn held(&self) -> usize {
        self.lock()
            .values()
            .flat_map(|w| &w.held)
            .filter(|h| !h.reply.is_closed())
            .count()
    }

    /// At a held call's deadline: fails every held call of the gang if `uid` is still among
    /// them and the gang's deadline has come (see [`Expiry`]).
    fn time_out(&self, group: &PodGroup, uid: &str) -> Expiry {
        let timeout = self.settings.timeout(group);
        let max_hold = self.settings.max_hold;
        // The reservations go in the same section as the held calls (see [`Permits::step`]): a
        // member's call in between would otherwise count them towards a quorum nobody binds.
        let (waiting, uids, bound) = {
            let mut all = self.lock();
            let Some(gang) = all
                .get(&group.key)
                .filter(|w| w.held.iter().any(|h| h.request.uid == uid))
            else {
                return Expiry::Taken;
            };
            let deadline = gang.deadline(timeout, max_hold);
            if Instant::now() < deadline {
                return Expiry::Later(deadline);
            }
            let Some(waiting) = all.remove(&group.key) else {
                return Expiry::Taken;
            };
            set_held_gauge(all.values().map(|w| w.held.len()).sum());
            let uids: Vec<String> = waiting.held.iter().map(|h| h.request.uid.clone()).collect();
            let bound = self.ledger.release_gang(&group.key, &uids);
            (waiting, uids, bound)
        };
        let placed = bound + uids.len();
        let limit = if waiting.deadline(timeout, max_hold) == waiting.latest + timeout {
            format!(", and no other within {}s", timeout.as_secs())
        } else {
            format!(" within {}s (--max-bind-hold-seconds)", max_hold.as_secs())
        };
        let why = format!(
            "gang {}: {placed} of {} members placed{limit}; released them so the scheduler retries the gang",
            group.key, group.min_member
        );
        tracing::info!(group = %group.key, held = uids.len(), "gang timed out waiting for quorum");
        ::metrics::counter!(metrics::GANG_TIMEOUTS_TOTAL).increment(1);
        let mut own = Expiry::Taken;
        for held in waiting.held {
            let result = Err(held.request.failed(why.clone()));
            if held.request.uid == uid {
                own = Expiry::Failed(result);
            } else {
                let _ = held.reply.send(result);
            }
        }
        own
    }

    /// Quorum: binds every `held` member (held since `since`) and `request` together and
    /// answers all of them.
    async fn bind_gang(
        &self,
        group: &PodGroup,
        since: Option<Instant>,
        held: Vec<Held>,
        request: BindRequest,
    ) -> Result<(), Error> {
        let results = join_all(
            held.iter()
                .map(|h| &h.request)
                .chain(std::iter::once(&request))
                .map(|r| self.binder.bind(r)),
        )
        .await;
        if let Some(since) = since {
            ::metrics::histogram!(metrics::GANG_BIND_WAIT_SECONDS)
                .record(since.elapsed().as_secs_f64());
            tracing::info!(group = %group.key, members = held.len() + 1, "gang reached quorum; bound");
        }
        let mut results = results.into_iter();
        for held in held {
            let result = results.next().expect("one result per request");
            if let Err(e) = &result {
                tracing::error!(group = %group.key, error = %e, "failed to bind a gang member after quorum");
                self.ledger.release(std::slice::from_ref(&held.request.uid));
            }
            let _ = held.reply.send(result);
        }
        let own = results.next().expect("one result per request");
        if own.is_err() {
            self.ledger.release(std::slice::from_ref(&request.uid));
        }
        own
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupKey, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn set_held_gauge(held: usize) {
    ::metrics::gauge!(metrics::GANG_BINDS_HELD).set(held as f64);
}

#[cfg(test)]
mod tests {
    use futures::future::BoxFuture;

    use super::*;
    use crate::cache::Cache;
    use crate::testing::{node, pod, pod_group};
    use gangplank_core::model::Pod;

    /// Binds everything, and counts.
    #[derive(Default)]
    struct Counting(Mutex<Vec<String>>);

    impl Binder for Counting {
        fn bind<'a>(&'a self, request: &'a BindRequest) -> BoxFuture<'a, Result<(), Error>> {
            self.0
                .lock()
                .unwrap()
                .push(format!("{}/{}", request.namespace, request.name));
            Box::pin(async { Ok(()) })
        }
    }

    /// `gangs` gangs of two pods each, `g{i}-0` and `g{i}-1`, and a node with room for all.
    fn cluster(gangs: usize) -> Cache {
        cluster_of(gangs, 2)
    }

    /// `gangs` gangs of `size` pods each, `g{i}-0` to `g{i}-{size-1}`, with a timeout of 5 s,
    /// and a node with room for all.
    fn cluster_of(gangs: usize, size: u32) -> Cache {
        cluster_placed(gangs, size, false)
    }

    /// As [`cluster_of`], the gangs placed whole by the scheduler or not.
    fn cluster_placed(gangs: usize, size: u32, by_scheduler: bool) -> Cache {
        let (cache, mut mirror) = Cache::new();
        mirror.apply_node(node("n", 1_000_000, 10_000));
        for g in 0..gangs {
            let name = format!("g{g}");
            mirror.apply_pod_group(PodGroup {
                placed_whole_by_scheduler: by_scheduler,
                ..pod_group(&name, size, "q", Duration::from_secs(5))
            });
            for m in 0..size {
                mirror.apply_pod(Pod {
                    pod_group: Some(name.clone()),
                    marked: true,
                    ..pod(&format!("g{g}-{m}"), 100)
                });
            }
        }
        cache
    }

    fn request(uid: &str) -> BindRequest {
        BindRequest {
            namespace: "ns".into(),
            name: uid.into(),
            uid: uid.into(),
            node: "n".into(),
        }
    }

    fn permits(cache: Cache, binder: Arc<Counting>) -> Permits {
        permits_holding(cache, binder, Duration::from_secs(5))
    }

    fn permits_holding(cache: Cache, binder: Arc<Counting>, max_hold: Duration) -> Permits {
        let settings = Settings {
            strategy: Default::default(),
            max_hold,
            bind_unmarked: false,
            hold_scheduler_gangs: false,
            gated_admission: false,
        };
        Permits::new(cache.ledger(), binder, settings)
    }

    /// Calls bind for `uid` on a task of its own.
    fn bind_in_background(
        permits: &Arc<Permits>,
        uid: &str,
    ) -> tokio::task::JoinHandle<Result<(), Error>> {
        let (permits, uid) = (permits.clone(), uid.to_owned());
        tokio::spawn(async move { permits.bind(request(&uid)).await })
    }

    async fn after(seconds: u64) {
        tokio::time::sleep(Duration::from_secs(seconds)).await;
    }

    /// One gang of three that the stock scheduler places whole itself.
    fn scheduler_placed_gang() -> Cache {
        cluster_placed(1, 3, true)
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_of_a_gang_the_scheduler_places_whole_is_bound_at_once() {
        let binder = Arc::new(Counting::default());
        let permits = permits(scheduler_placed_gang(), binder.clone());
        permits
            .bind(request("g0-0"))
            .await
            .expect("bound without waiting for the other two");
        assert_eq!(*binder.0.lock().unwrap(), ["ns/g0-0"]);
        assert_eq!(permits.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn told_to_hold_them_it_holds_a_scheduler_placed_gang_like_any_other() {
        let binder = Arc::new(Counting::default());
        let mut permits = permits(scheduler_placed_gang(), binder.clone());
        permits.settings.hold_scheduler_gangs = true;
        let permits = Arc::new(permits);
        let first = bind_in_background(&permits, "g0-0");
        after(1).await;
        assert!(!first.is_finished(), "held for quorum");
        assert!(binder.0.lock().unwrap().is_empty());
        first.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_gang_whose_members_keep_arriving_is_held_past_its_timeout_from_the_first() {
        let binder = Arc::new(Counting::default());
        let permits = Arc::new(permits_holding(
            cluster_of(1, 3),
            binder.clone(),
            Duration::from_secs(60),
        ));
        let first = bind_in_background(&permits, "g0-0");
        after(4).await;
        let second = bind_in_background(&permits, "g0-1");
        after(4).await;
        // Eight seconds after the first member, three after the second: within the gang's 5 s.
        permits
            .bind(request("g0-2"))
            .await
            .expect("the last member binds");
        first.await.unwrap().expect("the first member binds");
        second.await.unwrap().expect("the second member binds");
        assert_eq!(binder.0.lock().unwrap().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_gang_with_no_member_placed_for_its_timeout_is_released_whole() {
        let cache = cluster_of(1, 3);
        let binder = Arc::new(Counting::default());
        let permits = Arc::new(permits_holding(
            cache.clone(),
            binder.clone(),
            Duration::from_secs(60),
        ));
        let first = bind_in_background(&permits, "g0-0");
        after(2).await;
        let second = bind_in_background(&permits, "g0-1");
        after(4).await;
        assert!(
            !first.is_finished(),
            "released 5 s after the first member, not the latest"
        );
        after(2).await;
        for call in [first, second] {
            let why = call.await.unwrap().expect_err("released").to_string();
            assert!(
                why.contains("2 of 3 members placed, and no other within 5s"),
                "{why}"
            );
        }
        assert_eq!(permits.held(), 0);
        assert!(
            cache.read(|s| s.ledger().reservations().is_empty()),
            "their room is free"
        );
        assert!(binder.0.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn no_call_is_held_longer_than_the_max_hold_however_the_gang_progresses() {
        let binder = Arc::new(Counting::default());
        let permits = Arc::new(permits_holding(
            cluster_of(1, 3),
            binder.clone(),
            Duration::from_secs(6),
        ));
        let first = bind_in_background(&permits, "g0-0");
        after(4).await;
        let second = bind_in_background(&permits, "g0-1");
        after(3).await;
        for call in [first, second] {
            let why = call.await.unwrap().expect_err("released").to_string();
            assert!(
                why.contains("2 of 3 members placed within 6s (--max-bind-hold-seconds)"),
                "{why}"
            );
        }
        assert!(binder.0.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_call_that_brings_quorum_takes_every_call_reserved_before_it() {
        let permits = permits(cluster(1), Arc::default());
        let Step::Held {
            answer: _waiting, ..
        } = permits.step(request("g0-0"))
        else {
            panic!("the first member waits");
        };
        // The first call's hold is registered with its reservation, before any other call.
        assert_eq!(permits.held(), 1);
        let Step::Quorum { held, .. } = permits.step(request("g0-1")) else {
            panic!("the second member brings quorum");
        };
        let held: Vec<&str> = held.iter().map(|h| h.request.uid.as_str()).collect();
        assert_eq!(held, ["g0-0"]);
        assert_eq!(permits.held(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn members_binding_at_the_same_time_are_bound_together_every_time() {
        const GANGS: usize = 300;
        let binder = Arc::new(Counting::default());
        let permits = Arc::new(permits(cluster(GANGS), binder.clone()));
        let calls: Vec<_> = (0..GANGS)
            .flat_map(|g| [format!("g{g}-0"), format!("g{g}-1")])
            .map(|uid| {
                let permits = permits.clone();
                tokio::spawn(async move { permits.bind(request(&uid)).await })
            })
            .collect();
        // A member left waiting for a quorum that came without it is answered with an error at
        // the gangs' 5 s timeout.
        for call in calls {
            call.await.unwrap().expect("every member bound");
        }
        assert_eq!(binder.0.lock().unwrap().len(), 2 * GANGS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_call_whose_caller_went_away_is_released_by_the_timer_with_no_other_call() {
        let cache = cluster(1);
        let permits = Arc::new(permits(cache.clone(), Arc::default()));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let timer = tokio::spawn(super::super::expiry::run(
            cache.ledger(),
            permits.clone(),
            shutdown.clone(),
        ));
        let call = bind_in_background(&permits, "g0-0");
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(cache.read(|s| s.ledger().reservations().contains_key("g0-0")));
        // The scheduler hangs up: the server drops the call's handler.
        call.abort();
        tokio::time::sleep(super::super::expiry::CHECK_EVERY).await;
        assert!(
            cache.read(|s| !s.ledger().reservations().contains_key("g0-0")),
            "the abandoned placement holds room until the next bind call"
        );
        assert_eq!(permits.held(), 0);
        shutdown.cancel();
        timer.await.unwrap();
    }

    #[tokio::test]
    async fn a_held_call_whose_caller_went_away_counts_toward_no_quorum() {
        let cache = cluster(1);
        let binder = Arc::new(Counting::default());
        let permits = permits(cache.clone(), binder.clone());
        // The first member's call is held, then its scheduler hangs up (the handler is dropped).
        let Step::Held { answer, .. } = permits.step(request("g0-0")) else {
            panic!("the first member waits");
        };
        drop(answer);
        assert_eq!(permits.held(), 0);
        // The second member's call does not make a quorum with it: it is held in turn.
        let Step::Held {
            answer: _waiting, ..
        } = permits.step(request("g0-1"))
        else {
            panic!("a gang of two does not complete on a placement its scheduler gave up");
        };
        assert_eq!(permits.held(), 1);
        assert!(
            cache.read(|s| !s.ledger().reservations().contains_key("g0-0")),
            "the abandoned placement no longer holds room"
        );
        assert!(binder.0.lock().unwrap().is_empty());
    }
}
