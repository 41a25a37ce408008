//! The environment: the container of coops, mboxes and dispatchers.
//!
//! # Stop
//!
//! 1. [`Environment::stop`] with stop guards installed calls each guard's
//!    [`StopGuard::stop`] once and returns; the stop goes on when the last guard is
//!    removed. Registration still works meanwhile.
//! 2. The environment becomes *shutting down*: registering fails with
//!    [`RegisterError::ShuttingDown`], and every top-level coop is deregistered with
//!    reason `Shutdown` (their children with reason `Parent`). Agents still get `on_finish`.
//! 3. When the last coop is final, [`Environment::launch`] stops the finalizer thread and
//!    the default dispatcher and returns.
//!
//! Autoshutdown: when the last coop is final and `launch`'s init has returned, the
//! environment stops by itself (unless [`EnvParams::disable_autoshutdown`]).

mod finish_hooks;
pub(crate) mod handle;
mod hooks;
pub mod introspect;
mod keep;
mod params;
mod registry;
mod stop_guard;
mod wrapped;

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use thiserror::Error;

pub use handle::{Environment, WeakEnv};
pub use introspect::{
    AgentInfo, AgentStatus, CoopInfo, CoopStatus, Introspection, MboxInfo, SinkInfo,
    SubscriberInfo, SubscriptionInfo,
};
pub use params::EnvParams;
pub use stop_guard::{StopGuard, StopGuardError};
pub use wrapped::WrappedEnv;

pub(crate) use finish_hooks::{FinishHook, FinishHooks};

use crate::coop::{self, Coop, CoopHandle, CoopInner, DeregReason, RegisterError};
use crate::dispatcher::{one_thread, Binder, BuildError, DispatcherHandle};
use crate::drops::{DropCounters, DropCounts, DropReason};
use crate::exception::ExceptionReaction;
use crate::mbox::named::{Introduced, NamedMboxError, NamedRegistry};
use crate::mbox::{mpmc, unique, Mbox, Repr};
use crate::stats::{StatsController, StatsCore};
use crate::timer::TimerThread;
use crate::trace::{Trace, TraceFilter, TraceHub};

/// Why an environment could not run.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The default dispatcher could not start.
    #[error("cannot start the default dispatcher: {0}")]
    Dispatcher(#[from] BuildError),
    /// A thread of the environment could not be started.
    #[error("cannot spawn an environment thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// The init function of a wrapped environment panicked.
    #[error("the init function panicked: {0}")]
    InitPanicked(String),
}

pub(crate) struct EnvInner {
    state: Mutex<EnvState>,
    finished: Condvar,
    /// Hook of feature `tokio` (`tokio_interop`'s awaitable end): run once, outside the
    /// lock, after `finished` is set. Empty unless an async caller awaits the end.
    finish_hooks: Arc<FinishHooks>,
    named: Arc<NamedRegistry>,
    introduced: Introduced,
    pub(crate) drops: Arc<DropCounters>,
    /// The names of its agents (`Context::set_name`).
    pub(crate) names: Arc<crate::agent::AgentNames>,
    default_disp: Mutex<Option<DispatcherHandle>>,
    final_tx: Sender<FinalCmd>,
    reaction: ExceptionReaction,
    logger: Option<params::ErrorLogger>,
    autoshutdown: bool,
    pub(crate) stats: Arc<StatsCore>,
    pub(crate) trace: Trace,
    pub(crate) timers: TimerThread,
    /// Unique in the process, never 0.
    pub(crate) id: u64,
    /// When `launch` began (the uptime of `introspect`).
    pub(crate) started: std::time::Instant,
    /// `EnvState::shutting_down`, readable without the lock (set under it): every
    /// registration and every final step asks, and the spawn-and-stop profile had the two
    /// takings of the state lock at ~70 instructions per agent.
    shutting_down: std::sync::atomic::AtomicBool,
    /// Coops that declared themselves idle ([`Environment::idle_coops_changed`]); may be
    /// below the true count for a moment (a decrease applied before its increase). Not
    /// under the state lock: the actors layer changes it twice per recycled mailbox
    /// (callgrind `ydb_register`: ~70 instructions a change with the lock).
    idle_coops: std::sync::atomic::AtomicI64,
    /// `EnvState::init_done`, readable without the lock (set under it).
    init_returned: std::sync::atomic::AtomicBool,
    /// `EnvState::coops.len()`, readable without the lock (stored under it after each
    /// change): a mailbox that parks checks the autoshutdown under the lock only when the
    /// idle coops may be all of them, not at every park.
    live_coops: std::sync::atomic::AtomicI64,
}

#[derive(Default)]
struct EnvState {
    coops: registry::Registry<CoopInner>,
    stop_requested: bool,
    guards_notified: bool,
    guards: Vec<Arc<dyn StopGuard>>,
    shutting_down: bool,
    finished: bool,
    init_done: bool,
    /// What [`Environment::keep`] holds until the end, in the order given.
    kept: Vec<Box<dyn std::any::Any + Send>>,
}

enum FinalCmd {
    Final(Arc<CoopInner>),
    /// A dispatcher's last binder, to be dropped (joining its threads) off its own threads.
    Drop(crate::dispatcher::Binder),
    Exit,
}

impl Environment {
    /// Runs an environment with default parameters: `init` runs on the calling thread,
    /// then the call blocks until the environment stops.
    ///
    /// If `init` panics, the environment is stopped and the panic resumes after shutdown.
    ///
    /// # Errors
    ///
    /// [`LaunchError`] if the environment's threads cannot start.
    pub fn launch<F: FnOnce(&Environment)>(init: F) -> Result<(), LaunchError> {
        Self::launch_with(EnvParams::new(), init)
    }

    /// [`launch`](Self::launch) with parameters.
    ///
    /// # Errors
    ///
    /// As [`launch`](Self::launch).
    pub fn launch_with<F: FnOnce(&Environment)>(
        params: EnvParams,
        init: F,
    ) -> Result<(), LaunchError> {
        let default = one_thread::Builder::new()
            .name("agentbox-default")
            .build()?;
        let (final_tx, final_rx) = crossbeam_channel::unbounded();
        let names = Arc::new(crate::agent::AgentNames::default());
        let trace: Trace = params
            .tracer
            .map(|t| Arc::new(TraceHub::new(t, params.trace_filter, names.clone())));
        let drops = Arc::new(DropCounters::new(params.log_drops));
        let env = Environment(Arc::new_cyclic(|weak| {
            let weak = WeakEnv(weak.clone());
            EnvInner {
                state: Mutex::new(EnvState::default()),
                finish_hooks: Arc::default(),
                finished: Condvar::new(),
                named: Arc::new(NamedRegistry::default()),
                introduced: Introduced::default(),
                drops: drops.clone(),
                names,
                default_disp: Mutex::new(Some(default)),
                final_tx,
                reaction: params.exception_reaction,
                logger: params.error_logger,
                autoshutdown: params.autoshutdown,
                stats: StatsCore::new(
                    weak.clone(),
                    // The stats' own notices are broadcasts: a notice nobody listens to
                    // is not a dropped message (counters of its own).
                    Mbox(Repr::Mpmc(mpmc::create(
                        weak.clone(),
                        trace.clone(),
                        Arc::new(DropCounters::default()),
                    ))),
                ),
                trace,
                timers: TimerThread::new(weak.clone()),
                id: {
                    static NEXT_ENV: std::sync::atomic::AtomicU64 =
                        std::sync::atomic::AtomicU64::new(1);
                    NEXT_ENV.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                },
                started: std::time::Instant::now(),
                shutting_down: std::sync::atomic::AtomicBool::new(false),
                idle_coops: std::sync::atomic::AtomicI64::new(0),
                init_returned: std::sync::atomic::AtomicBool::new(false),
                live_coops: std::sync::atomic::AtomicI64::new(0),
            }
        }));
        env.0.timers.start().map_err(LaunchError::Spawn)?;
        let weak = env.downgrade();
        let finalizer = std::thread::Builder::new()
            .name("agentbox-finalizer".into())
            .spawn(move || run_finalizer(final_rx, weak))
            .map_err(LaunchError::Spawn)?;

        let outcome = catch_unwind(AssertUnwindSafe(|| init(&env)));
        {
            let mut st = env.0.state.lock();
            st.init_done = true;
            env.0
                .init_returned
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if outcome.is_err() {
            env.stop();
        } else {
            env.maybe_autoshutdown();
        }
        {
            let mut st = env.0.state.lock();
            while !st.finished {
                env.0.finished.wait(&mut st);
            }
        }
        // What `keep` holds goes first, last kept first, while the timers and the
        // dispatchers it may stop or observe still run.
        let kept = std::mem::take(&mut env.0.state.lock().kept);
        keep::drop_in_reverse(&env, kept);
        env.0.stats.shut_down();
        env.0.timers.stop();
        // Introduced mboxes may hold the environment (a custom mbox): let them go.
        drop(env.0.introduced.clear());
        let _ = env.0.final_tx.send(FinalCmd::Exit);
        let _ = finalizer.join();
        // Joins the default dispatcher's thread (no agent is bound to it any more).
        drop(env.0.default_disp.lock().take());
        if let Err(panic) = outcome {
            resume_unwind(panic);
        }
        Ok(())
    }

    /// A weak handle to this environment.
    pub fn downgrade(&self) -> WeakEnv {
        WeakEnv(Arc::downgrade(&self.0))
    }

    /// Starts stopping the environment (see the module docs); returns at once.
    pub fn stop(&self) {
        enum Next {
            Nothing,
            NotifyGuards(Vec<Arc<dyn StopGuard>>),
            Deregister(Vec<Arc<CoopInner>>),
        }
        let next = {
            let mut st = self.0.state.lock();
            if st.shutting_down {
                Next::Nothing
            } else if !st.guards.is_empty() {
                st.stop_requested = true;
                if st.guards_notified {
                    Next::Nothing
                } else {
                    st.guards_notified = true;
                    Next::NotifyGuards(st.guards.clone())
                }
            } else {
                st.stop_requested = true;
                st.shutting_down = true;
                self.0
                    .shutting_down
                    .store(true, std::sync::atomic::Ordering::Release);
                let mut roots: Vec<_> = st
                    .coops
                    .coops()
                    .filter(|c| c.parent.is_none())
                    .cloned()
                    .collect();
                roots.sort_by_key(|c| c.id);
                Next::Deregister(roots)
            }
        };
        match next {
            Next::Nothing => {}
            Next::NotifyGuards(guards) => {
                for g in guards {
                    g.stop();
                }
            }
            Next::Deregister(roots) => {
                for c in roots {
                    c.deregister(DeregReason::Shutdown);
                }
                self.check_finished();
            }
        }
    }

    /// Whether [`stop`](Self::stop) has begun the shutdown (after any stop guards).
    pub fn is_shutting_down(&self) -> bool {
        self.0
            .shutting_down
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Installs a stop guard: a later [`stop`](Self::stop) waits until it is removed.
    ///
    /// # Errors
    ///
    /// [`StopGuardError::StopInProgress`] once a stop has been requested.
    pub fn setup_stop_guard(&self, guard: Arc<dyn StopGuard>) -> Result<(), StopGuardError> {
        let mut st = self.0.state.lock();
        if st.stop_requested {
            return Err(StopGuardError::StopInProgress);
        }
        st.guards.push(guard);
        Ok(())
    }

    /// Removes a stop guard; if a stop is waiting for the last one, it proceeds.
    pub fn remove_stop_guard(&self, guard: &Arc<dyn StopGuard>) {
        let proceed = {
            let mut st = self.0.state.lock();
            st.guards.retain(|g| !Arc::ptr_eq(g, guard));
            st.guards.is_empty() && st.stop_requested && !st.shutting_down
        };
        if proceed {
            self.stop();
        }
    }

    /// A new anonymous multi-consumer mbox.
    pub fn create_mbox(&self) -> Mbox {
        Mbox(Repr::Mpmc(mpmc::create(
            self.downgrade(),
            self.0.trace.clone(),
            self.0.drops.clone(),
        )))
    }

    /// The named multi-consumer mbox `name`: the same mbox while any handle to it lives,
    /// a new one after the last handle is dropped.
    pub fn named_mbox(&self, name: &str) -> Mbox {
        Mbox(Repr::Mpmc(self.0.named.get_or_create(
            name,
            self.downgrade(),
            self.0.trace.clone(),
            self.0.drops.clone(),
        )))
    }

    /// The mbox named `name` in `namespace`, made by `factory` the first time it is asked
    /// for (SObjectizer's `introduce_named_mbox`).
    ///
    /// - The same `(namespace, name)` gives the same mbox, whatever factory is passed later
    ///   (only the first one runs).
    /// - The same name in another namespace, or from [`named_mbox`](Self::named_mbox) (the
    ///   default namespace), is another mbox.
    /// - The factory may make any kind of mbox (a custom one, a direct mbox, another named
    ///   mbox...) and may itself introduce named mboxes: it runs without any lock held.
    /// - An introduced mbox lives as long as the environment.
    ///
    /// # Errors
    ///
    /// [`NamedMboxError::EmptyNamespace`] for an empty namespace.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::prelude::*;
    /// Environment::launch(|env| {
    ///     let a = env.introduce_named_mbox("sensors", "temp", || env.create_mbox()).unwrap();
    ///     let b = env.introduce_named_mbox("sensors", "temp", || unreachable!()).unwrap();
    ///     assert_eq!(a, b);
    ///     assert_ne!(a, env.named_mbox("temp"));
    ///     assert!(env.introduce_named_mbox("", "temp", || env.create_mbox()).is_err());
    /// }).unwrap();
    /// ```
    pub fn introduce_named_mbox(
        &self,
        namespace: &str,
        name: &str,
        factory: impl FnOnce() -> Mbox,
    ) -> Result<Mbox, NamedMboxError> {
        self.0.introduced.introduce(namespace, name, factory)
    }

    /// Number of named mboxes alive.
    pub fn named_mbox_count(&self) -> usize {
        self.0.named.len()
    }

    /// A new single-consumer mbox that any agent may subscribe to, but only one agent per
    /// message type; it carries mutable messages and has no delivery filters.
    pub fn create_unique_subscribers_mbox(&self) -> Mbox {
        Mbox(Repr::Unique(Arc::new(unique::UniqueMbox::new(
            self.downgrade(),
            self.0.trace.clone(),
            self.0.drops.clone(),
        ))))
    }

    /// A binder for the environment's default `one_thread` dispatcher.
    ///
    /// After `launch` returned, this is a binder to a stopped dispatcher (registration
    /// fails earlier, with `ShuttingDown`).
    pub fn default_binder(&self) -> Binder {
        match &*self.0.default_disp.lock() {
            Some(d) => d.binder(),
            None => crate::dispatcher::stopped_binder(),
        }
    }

    /// A new coop to fill and register.
    pub fn make_coop(&self) -> Coop {
        Coop::new(self.clone(), None)
    }

    /// A new child coop of `parent`: deregistered when `parent` is, and before it.
    pub fn make_child_coop(&self, parent: &CoopHandle) -> Coop {
        Coop::new(self.clone(), Some(parent.clone()))
    }

    /// Registers a coop (see `coop`'s protocol).
    ///
    /// # Errors
    ///
    /// [`RegisterError`]; the coop's agents are dropped.
    pub fn register_coop(&self, coop: Coop) -> Result<CoopHandle, RegisterError> {
        coop::register(coop)
    }

    /// Makes a coop, lets `fill` add its agents, registers it, and returns what `fill`
    /// returned.
    ///
    /// # Errors
    ///
    /// As [`register_coop`](Self::register_coop).
    pub fn introduce_coop<R>(&self, fill: impl FnOnce(&mut Coop) -> R) -> Result<R, RegisterError> {
        let mut coop = self.make_coop();
        let r = fill(&mut coop);
        self.register_coop(coop).map(|_| r)
    }

    /// [`introduce_coop`](Self::introduce_coop) for a child coop of `parent`.
    ///
    /// # Errors
    ///
    /// As [`register_coop`](Self::register_coop).
    pub fn introduce_child_coop<R>(
        &self,
        parent: &CoopHandle,
        fill: impl FnOnce(&mut Coop) -> R,
    ) -> Result<R, RegisterError> {
        let mut coop = self.make_child_coop(parent);
        let r = fill(&mut coop);
        self.register_coop(coop).map(|_| r)
    }

    /// The run-time monitoring controller (off until turned on; see [`crate::stats`]).
    pub fn stats_controller(&self) -> StatsController {
        StatsController(self.0.stats.clone())
    }

    /// Replaces the delivery tracer's filter (`None`: every record passes); takes effect
    /// for the next record on every thread. Does nothing when tracing is off (no
    /// [`EnvParams::message_tracer`]).
    pub fn change_trace_filter(&self, filter: Option<TraceFilter>) {
        if let Some(hub) = &self.0.trace {
            hub.set_filter(filter);
        }
    }

    /// Whether a delivery tracer is installed.
    pub fn is_tracing(&self) -> bool {
        self.0.trace.is_some()
    }

    /// Number of timers scheduled and not yet fired for the last time or cancelled.
    pub fn pending_timers(&self) -> usize {
        self.0.timers.pending()
    }

    /// Number of registered coops (including deregistering ones not yet final).
    pub fn coop_count(&self) -> usize {
        self.0.state.lock().coops.len()
    }

    pub(crate) fn exception_reaction(&self) -> ExceptionReaction {
        self.0.reaction
    }

    /// Messages accepted and then dropped so far, by reason (also in the run-time stats).
    pub fn drop_counts(&self) -> DropCounts {
        self.0.drops.snapshot()
    }

    /// Reports that a message sent to `mbox` reached no subscriber: counted in
    /// [`drop_counts`](Self::drop_counts) and traced as `NoSubscribers`. Custom mboxes
    /// call this, as the built-in ones do.
    pub fn trace_no_subscribers(&self, mbox: crate::mbox::MboxId, msg: &crate::Message) {
        self.0.drops.count(DropReason::NoSubscribers);
        crate::trace::emit(&self.0.trace, || {
            crate::trace::TraceRecord::new(crate::trace::TraceEvent::NoSubscribers)
                .mbox(mbox)
                .msg(msg.message_type())
        });
    }

    /// Writes `line` through the environment's error logger (stderr by default, see
    /// [`EnvParams::error_logger`]). Layers built on the public API report through it.
    pub fn log_error(&self, line: &str) {
        <handle::EnvLayer as handle::EnvSide>::log_error(&self.0, line)
    }

    /// Coop registration step 3.
    pub(crate) fn link_coop(&self, coop: &Arc<CoopInner>) -> Result<(), RegisterError> {
        let mut st = self.0.state.lock();
        if st.shutting_down {
            return Err(RegisterError::ShuttingDown);
        }
        if let Some(p) = &coop.parent {
            p.add_child(coop)?;
        }
        st.coops.insert(coop);
        self.mirror_coop_count(&st);
        Ok(())
    }

    pub(crate) fn unlink_coop(&self, coop: &CoopInner) {
        let mut st = self.0.state.lock();
        st.coops.remove(coop);
        self.mirror_coop_count(&st);
    }

    /// Publishes the registry's length to `live_coops` (under the state lock).
    fn mirror_coop_count(&self, st: &EnvState) {
        let n = i64::try_from(st.coops.len()).unwrap_or(i64::MAX);
        self.0
            .live_coops
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn schedule_final(&self, coop: Arc<CoopInner>) {
        if let Err(e) = self.0.final_tx.send(FinalCmd::Final(coop)) {
            // The finalizer is gone only after launch returned: finish here.
            if let FinalCmd::Final(c) = e.0 {
                c.finalize(Some(self));
            }
        }
    }

    /// Drops `binder` on the finalizer thread (see `CoopInner::finalize_sealed`); here if the
    /// finalizer is gone.
    pub(crate) fn drop_on_finalizer(&self, binder: crate::dispatcher::Binder) {
        if let Err(e) = self.0.final_tx.send(FinalCmd::Drop(binder)) {
            drop(e);
        }
    }

    pub(crate) fn coop_finalized(&self) {
        let st = self.0.state.lock();
        self.after_final(st);
    }

    /// [`unlink_coop`](Self::unlink_coop) and [`coop_finalized`](Self::coop_finalized)
    /// under one lock, for a final step with nothing to do between them (no notices, no
    /// parent). The spawn-and-stop profile showed the three takings of the state lock
    /// (unlink, then `is_shutting_down`, then the autoshutdown check) at ~120
    /// instructions per coop.
    pub(crate) fn unlink_coop_finalized(&self, coop: &CoopInner) {
        let mut st = self.0.state.lock();
        st.coops.remove(coop);
        self.mirror_coop_count(&st);
        self.after_final(st);
    }

    /// Hook of the actors layer's recycled mailboxes (`actors::mailbox`): `delta` more
    /// registered coops are idle (negative: fewer). Idle coops do not hold the
    /// autoshutdown: it happens when every coop left is idle, as when none is left.
    pub(crate) fn idle_coops_changed(&self, delta: i64) {
        use std::sync::atomic::Ordering::SeqCst;
        // SeqCst with `launch`'s store of `init_returned` and its check, and with a coop's
        // unlinking (its store of `live_coops`, then its check of `idle_coops`, under the
        // lock): of each pair, one sees the other's write, so the last change checks.
        let idle = self
            .0
            .idle_coops
            .fetch_add(delta, SeqCst)
            .saturating_add(delta);
        if delta > 0
            && self.0.autoshutdown
            && self.0.init_returned.load(SeqCst)
            && self.0.live_coops.load(SeqCst) <= idle
        {
            let st = self.0.state.lock();
            if !st.shutting_down {
                self.after_final(st);
            }
        }
    }

    /// Whether every registered coop is idle (none is, when there is none).
    fn only_idle(&self, st: &EnvState) -> bool {
        let idle = self.0.idle_coops.load(std::sync::atomic::Ordering::SeqCst);
        i64::try_from(st.coops.len()).unwrap_or(i64::MAX) <= idle
    }

    fn maybe_autoshutdown(&self) {
        let stop = {
            let st = self.0.state.lock();
            self.0.autoshutdown && st.init_done && self.only_idle(&st)
        };
        if stop {
            self.stop();
        }
    }

    /// A coop went final: the environment finishes its shutdown when the last coop went,
    /// or stops by itself (autoshutdown) when nothing is left after `init`.
    fn after_final(&self, st: parking_lot::MutexGuard<'_, EnvState>) {
        if st.shutting_down {
            self.finish_if_done(st);
            return;
        }
        let stop = self.0.autoshutdown && st.init_done && self.only_idle(&st);
        drop(st);
        if stop {
            self.stop();
        }
    }

    fn check_finished(&self) {
        self.finish_if_done(self.0.state.lock());
    }

    /// Marks the environment finished when it is shutting down and its last coop is gone,
    /// then runs the finish hooks with the lock released: the one place for every path
    /// that can finish it (a coop's final step, the stop itself).
    fn finish_if_done(&self, mut st: parking_lot::MutexGuard<'_, EnvState>) {
        if !(st.shutting_down && st.coops.is_empty() && !st.finished) {
            return;
        }
        st.finished = true;
        self.0.finished.notify_all();
        drop(st);
        self.0.finish_hooks.finish();
    }

    /// Hook of feature `tokio`: runs `hook` once the environment has finished (every coop
    /// gone after a stop: what [`launch`](Self::launch) waits for), at once if it has.
    /// The hook runs on the thread that finished the environment, with no lock held; it
    /// must be short and must not panic (it completes a oneshot channel).
    ///
    /// Returns the table of hooks and the hook's key while it waits (`None`: it has run
    /// already), to take it back with [`FinishHooks::cancel`].
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn on_finished(&self, hook: FinishHook) -> Option<(Arc<FinishHooks>, u64)> {
        let key = self.0.finish_hooks.add(hook)?;
        Some((self.0.finish_hooks.clone(), key))
    }

    /// For tests: how many finish hooks wait (one per pending
    /// `Environment::finished` future of feature `tokio`).
    #[doc(hidden)]
    pub fn waiting_finish_hooks(&self) -> usize {
        self.0.finish_hooks.len()
    }
}

fn run_finalizer(rx: Receiver<FinalCmd>, env: WeakEnv) {
    for cmd in rx {
        match cmd {
            FinalCmd::Final(coop) => {
                let env = env.upgrade();
                coop.finalize(env.as_ref());
            }
            FinalCmd::Drop(binder) => drop(binder),
            FinalCmd::Exit => break,
        }
    }
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Environment({:p})", Arc::as_ptr(&self.0))
    }
}
