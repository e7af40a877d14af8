//! Bind as Permit: hold each gang member's bind call until the gang has quorum.
//!
//! The scheduler calls bind from its asynchronous binding goroutine after *assuming* the pod on
//! the node, so a held call blocks nothing but that pod, and the pod's resources stay reserved
//! in the scheduler's cache meanwhile. For a member of a gang without quorum the call is held
//! (a reservation is recorded in the cache, see [`crate::gang::claims::reserve`]); when
//! reserved plus bound members reach `minMember`, every held member and this one are bound
//! together and all calls answered. If quorum does not come within the gang's timeout (the
//! PodGroup's `scheduleTimeoutSeconds`, capped by `--max-bind-hold-seconds`, which must stay
//! below the scheduler's `httpTimeout`), every held call is answered with an `Error` saying how
//! many members were placed out of how many: the scheduler forgets those pods, frees their
//! room and retries them with backoff. Nothing is bound until quorum, so a gang is never bound
//! partially. A restart loses held calls: the scheduler sees them fail and retries.
//!
//! Pods in no group, and members beyond quorum, are bound at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::join_all;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{BindRequest, Binder, Error};
use crate::cache::{Cache, GroupKey, PodGroup};
use crate::gang::claims::{self, Settings};
use crate::metrics;

/// Holds gang members' bind calls until quorum; see the module docs.
pub struct Permits {
    cache: Cache,
    binder: Arc<dyn Binder>,
    settings: Settings,
    waiting: Mutex<HashMap<GroupKey, Waiting>>,
}

struct Waiting {
    since: Instant,
    deadline: Instant,
    held: Vec<Held>,
}

struct Held {
    request: BindRequest,
    reply: oneshot::Sender<Result<(), Error>>,
}

impl Permits {
    pub fn new(cache: Cache, binder: Arc<dyn Binder>, settings: Settings) -> Self {
        Self {
            cache,
            binder,
            settings,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Binds `request`, or holds it until its gang has quorum; see the module docs.
    pub async fn bind(&self, request: BindRequest) -> Result<(), Error> {
        let display = format!("{}/{}", request.namespace, request.name);
        let reserved = self.cache.update(|s| {
            claims::reserve(
                s,
                &request.uid,
                &display,
                &request.node,
                &self.settings,
                std::time::Instant::now(),
            )
        });
        match reserved {
            Err(e) => Err(request.failed(e.to_string())),
            Ok(None) => self.binder.bind(&request).await,
            Ok(Some((group, true))) => self.bind_gang(&group, request).await,
            Ok(Some((group, false))) => self.hold(&group, request).await,
        }
    }

    /// Answers every held call with an error, for shutdown: the scheduler frees the pods at
    /// once instead of waiting for its `httpTimeout`.
    pub fn fail_all(&self, why: &str) {
        let all: Vec<(GroupKey, Waiting)> = self.lock().drain().collect();
        for (key, waiting) in all {
            let uids: Vec<String> = waiting.held.iter().map(|h| h.request.uid.clone()).collect();
            self.cache.update(|s| claims::release(s, &key, &uids));
            for held in waiting.held {
                let _ = held.reply.send(Err(held.request.failed(why)));
            }
        }
        set_held_gauge(0);
    }

    /// Calls currently held.
    pub fn held(&self) -> usize {
        self.lock().values().map(|w| w.held.len()).sum()
    }

    async fn hold(&self, group: &PodGroup, request: BindRequest) -> Result<(), Error> {
        let (reply, mut answer) = oneshot::channel();
        let uid = request.uid.clone();
        let deadline = {
            let mut waiting = self.lock();
            let now = Instant::now();
            let entry = waiting.entry(group.key.clone()).or_insert_with(|| Waiting {
                since: now,
                deadline: now + self.settings.timeout(group),
                held: Vec::new(),
            });
            // A retried call for the same pod replaces the one the scheduler gave up on.
            if let Some(i) = entry.held.iter().position(|h| h.request.uid == uid) {
                let old = entry.held.swap_remove(i);
                let _ = old
                    .reply
                    .send(Err(old.request.failed("superseded by a newer bind call")));
            }
            entry.held.push(Held { request, reply });
            let deadline = entry.deadline;
            set_held_gauge(waiting.values().map(|w| w.held.len()).sum());
            deadline
        };
        match tokio::time::timeout_at(deadline, &mut answer).await {
            Ok(result) => result.unwrap_or(Err(Error::Dropped)),
            Err(_elapsed) => match self.time_out(group, &uid) {
                Some(result) => result,
                // Quorum came at the same instant and took this call over: wait for its answer.
                None => answer.await.unwrap_or(Err(Error::Dropped)),
            },
        }
    }

    /// Fails every held call of the gang if `uid` is still among them; returns this call's
    /// answer, or `None` when another path already took the call.
    fn time_out(&self, group: &PodGroup, uid: &str) -> Option<Result<(), Error>> {
        let waiting = {
            let mut all = self.lock();
            let still_held = all
                .get(&group.key)
                .is_some_and(|w| w.held.iter().any(|h| h.request.uid == uid));
            if !still_held {
                return None;
            }
            let waiting = all.remove(&group.key)?;
            set_held_gauge(all.values().map(|w| w.held.len()).sum());
            waiting
        };
        let uids: Vec<String> = waiting.held.iter().map(|h| h.request.uid.clone()).collect();
        let bound = self.cache.update(|s| {
            claims::release(s, &group.key, &uids);
            claims::placed_members(s, &group.key, "")
        });
        let why = format!(
            "gang {}: {} of {} members placed within {}s; released them so the scheduler retries the gang",
            group.key,
            bound + uids.len(),
            group.min_member,
            self.settings.timeout(group).as_secs()
        );
        tracing::info!(group = %group.key, held = uids.len(), "gang timed out waiting for quorum");
        ::metrics::counter!(metrics::GANG_TIMEOUTS_TOTAL).increment(1);
        let mut own = None;
        for held in waiting.held {
            let result = Err(held.request.failed(why.clone()));
            if held.request.uid == uid {
                own = Some(result);
            } else {
                let _ = held.reply.send(result);
            }
        }
        own
    }

    /// Quorum: binds every held member and `request` together and answers all of them.
    async fn bind_gang(&self, group: &PodGroup, request: BindRequest) -> Result<(), Error> {
        let waiting = {
            let mut all = self.lock();
            let waiting = all.remove(&group.key);
            set_held_gauge(all.values().map(|w| w.held.len()).sum());
            waiting
        };
        let (since, held) = waiting.map_or((None, Vec::new()), |w| (Some(w.since), w.held));
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
                self.cache.update(|s| s.release(&held.request.uid));
            }
            let _ = held.reply.send(result);
        }
        let own = results.next().expect("one result per request");
        if own.is_err() {
            self.cache.update(|s| s.release(&request.uid));
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
