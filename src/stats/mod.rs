//! Run-time monitoring: a stats controller that distributes quantities as messages.
//!
//! Off by default; while off nothing runs and nothing is counted on the message path but
//! drops (one relaxed counter on each drop path, see [`DropCounts`](crate::DropCounts))
//! (dispatchers keep the counts they keep anyway: agents bound, demands waiting). Once
//! turned on, every period (default 2 s) a distribution thread sends to
//! [`StatsController::mbox`]: [`StatsStarted`], one [`Quantity`] per data source and
//! quantity, then [`StatsFinished`].
//!
//! # Quantity names
//!
//! A quantity is named `<prefix>/<suffix>`:
//!
//! | prefix | suffix | value |
//! |---|---|---|
//! | `coop_repository` | `coop.count` | coops registered (deregistering included) |
//! | `mbox_repository` | `named_mbox.count` | named mboxes alive |
//! | `timer_thread` | `timer.count` | timers pending (scheduled, not cancelled, not done) |
//! | `drops` | `no_subscribers.count`, `filtered.count`, `over_limit.count`, `no_handler.count`, `at_deregistration.count`, `redirection_depth.count`, `refused.count`, `receiver_finished.count`, `unreachable.count` | messages accepted by `send` and then dropped, by reason, since the environment started (see [`DropCounts`](crate::DropCounts)) |
//! | `disp/<kind>/<name>` | `agent.count` | agents bound to the dispatcher |
//! | `disp/<kind>/<name>` | `threads.count` | its worker threads |
//! | `disp/<kind>/<name>/<queue>` | `demands.count` | demands waiting in one queue |
//! | `disp/<kind>/<name>/<thread>` | `work.count`, `work.total_ns`, `work.avg_ns` | demands run by one worker thread, their total and mean time (with activity tracking) |
//! | `disp/<kind>/<name>/<thread>` | `wait.count`, `wait.total_ns`, `wait.avg_ns` | times the thread waited for work, in all and on average (with activity tracking) |
//! | `disp/<kind>/<name>` | `threads.target`, `threads.min`, `threads.default`, `threads.max` | an elastic thread pool's asked-for count and bounds (built with `thread_limits`; `threads.count` is the count running) |
//! | `disp/<kind>/<name>/wt-<i>` | `busy_us`, `cpu_us`, `parked_us`, `events.count` | an elastic pool's thread slot since the pool started: wall time not parked, the OS's CPU time of its threads, time parked, demands run |
//! | `disp/<kind>/<name>` | `activation.lt_<2^i>us` (i = 0..22), `activation.lt_inf` | an elastic pool's activation latencies (a queue's becoming ready to its first demand starting) per power-of-two bucket, counted since the pool started |
//! | `disp/<kind>/<name>` | `harmonizer.increasing_threads_by_needy_state`, `harmonizer.increasing_threads_by_exchange`, `harmonizer.decreasing_threads_by_starved_state`, `harmonizer.decreasing_threads_by_hoggish_state`, `harmonizer.decreasing_threads_by_exchange`, `harmonizer.is_needy`, `harmonizer.is_starved`, `harmonizer.is_hoggish` (0 or 1), `harmonizer.potential_max_thread_count_milli`, `foreign.events` | an elastic pool's harmonizer counters (see `dispatcher::elastic::HarmonizerCounters`) and the demands other pools' shared threads ran for it |
//! | `ic/node<N>/peer<P>` | `connected.count` (0 or 1), `bytes_out.count`, `bytes_in.count`, `events_out.count`, `events_in.count`, `events_without_codec.count`, `local_only_flags_cleared.count`, `proxy_refusals.count`, `packets_resent.count`, `reconnects.count`, `sessions_ended.count`, `queued_events.count`, `rtt.us` | one interconnect session (feature `interconnect`; see `interconnect::SessionStats`) |
//!
//! `<kind>` is the dispatcher kind (`one_thread`, `active_obj`, `active_group`,
//! `thread_pool`, `strictly_ordered`, `quoted_round_robin`, `one_per_prio`) and `<name>`
//! the name given to its builder. `<queue>` is `wt` for a single-thread dispatcher's
//! queue, `ao-<agent id>` for an `active_obj` agent, `ag-<group>` for an `active_group`
//! group, `cq-<coop id>` / `aq-<agent id>` for a thread pool's cooperation and individual
//! queues, and `p<0..7>` for a priority. `<thread>` is the same tag for single-thread
//! queues and `wt-<i>` for the i-th worker of a thread pool. A waiting count may lag by the
//! demands a worker has taken in its current round. Activity tracking is turned on per
//! dispatcher with its builder's `activity_tracking(true)`.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox::{Quantity, StatsFinished};
//!
//! struct Monitor { coops: Option<usize> }
//! impl Agent for Monitor {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         let stats = ctx.environment().stats_controller().mbox();
//!         ctx.subscribe(&stats).event(|a: &mut Self, _, q: &Quantity| {
//!             if q.prefix == "coop_repository" && q.suffix == "coop.count" {
//!                 a.coops = Some(q.value);
//!             }
//!         })?;
//!         ctx.subscribe(&stats).event(|a: &mut Self, ctx, _: &StatsFinished| {
//!             if let Some(n) = a.coops {
//!                 assert_eq!(n, 1);
//!                 ctx.environment().stats_controller().turn_off();
//!                 ctx.deregister_coop(DeregReason::Normal);
//!             }
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let stats = env.stats_controller();
//!     stats.set_distribution_period(Duration::from_millis(20));
//!     env.introduce_coop(|coop| { coop.add_agent(Monitor { coops: None }); }).unwrap();
//!     stats.turn_on();
//! }).unwrap();
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::environment::handle::{EnvInner, EnvLayer, EnvSide, Environment, WeakEnv};
use crate::mbox::Mbox;

pub(crate) mod source;
pub use source::{Quantity, StatsFinished, StatsStarted};
pub(crate) use source::{SourceRef, StatsSource};

/// What the stats controller needs of the environment it reports on (implemented by the
/// environment).
pub(crate) trait StatsHome {
    /// The environment's process-wide id.
    fn env_id(&self) -> u64;
    /// The environment's stats controller.
    fn stats(&self) -> &StatsCore;
    /// The environment's own figures: coops, named mboxes, timers and drops.
    fn own_quantities(env: &Environment, send: &mut dyn FnMut(Quantity))
    where
        Self: Sized;
}

/// A dispatcher's source as a binder holds it: registers itself with the environment of
/// each agent it binds, taking the environment's lock only when that environment differs
/// from the last one (nearly always, every agent of a dispatcher lives in one).
pub(crate) struct SourceReg {
    source: SourceRef,
    /// Id of the environment registered last; 0 for none.
    last_env: AtomicU64,
}

impl SourceReg {
    pub(crate) fn new(source: SourceRef) -> Self {
        SourceReg {
            source,
            last_env: AtomicU64::new(0),
        }
    }

    pub(crate) fn register(&self, env: &WeakEnv) {
        if let Some(env) = env.upgrade() {
            let home: &dyn StatsHome = &*env.0;
            let id = home.env_id();
            if self.last_env.swap(id, Ordering::Relaxed) != id {
                home.stats().add_source(&self.source);
            }
        }
    }
}

#[derive(Default)]
struct State {
    on: bool,
    period: Option<Duration>,
    thread: Option<JoinHandle<()>>,
    /// Bumped on every turn_on/turn_off: a distribution thread of an older generation ends.
    generation: u64,
}

pub(crate) struct StatsCore {
    mbox: Mbox,
    env: WeakEnv,
    state: Mutex<State>,
    wake: Condvar,
    sources: Mutex<Vec<Weak<dyn StatsSource>>>,
}

impl StatsCore {
    pub(crate) fn new(env: WeakEnv, mbox: Mbox) -> Arc<Self> {
        Arc::new(StatsCore {
            mbox,
            env,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            sources: Mutex::new(Vec::new()),
        })
    }

    /// Adds a source (held weakly: it stops when its owner drops it).
    pub(crate) fn add_source(&self, source: &SourceRef) {
        let mut sources = self.sources.lock();
        sources.retain(|s| s.strong_count() > 0);
        let weak = Arc::downgrade(source);
        if !sources.iter().any(|s| Weak::ptr_eq(s, &weak)) {
            sources.push(weak);
        }
    }

    /// The quantities of every source now, collected without sending anything (for
    /// `Environment::introspect`; works whether the controller is on or off).
    pub(crate) fn collect(&self) -> Vec<Quantity> {
        let sources: Vec<SourceRef> = self
            .sources
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut quantities = Vec::new();
        for s in sources {
            s.distribute(&mut |q| quantities.push(q));
        }
        quantities
    }

    /// Stops the distribution thread (environment shutdown).
    pub(crate) fn shut_down(&self) {
        let thread = {
            let mut st = self.state.lock();
            st.on = false;
            st.generation += 1;
            st.thread.take()
        };
        self.wake.notify_all();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    fn distribute_once(&self, env: &Environment) {
        let _ = self.mbox.send(StatsStarted);
        let send = |q: Quantity| {
            let _ = self.mbox.send(q);
        };
        <EnvInner as StatsHome>::own_quantities(env, &mut |q| send(q));
        let sources: Vec<SourceRef> = self
            .sources
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        // Every source's quantities are collected first and sent after: a source reads
        // its figures under its own locks, and a send may land in a queue behind one of
        // them (a subscriber bound to the dispatcher being measured), so no source ever
        // sends.
        let mut quantities = Vec::new();
        for s in sources {
            s.distribute(&mut |q| quantities.push(q));
        }
        for q in quantities {
            send(q);
        }
        let _ = self.mbox.send(StatsFinished);
    }

    fn run(self: Arc<Self>, generation: u64) {
        loop {
            {
                let mut st = self.state.lock();
                if st.generation != generation {
                    return;
                }
                let period = st.period.unwrap_or(Duration::from_secs(2));
                self.wake.wait_for(&mut st, period);
                if st.generation != generation {
                    return;
                }
            }
            match self.env.upgrade() {
                Some(env) => self.distribute_once(&env),
                None => return,
            }
        }
    }
}

/// The environment's stats controller: a cheap handle.
#[derive(Clone)]
pub struct StatsController(pub(crate) Arc<StatsCore>);

impl std::fmt::Debug for StatsController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsController")
            .field("mbox", &self.0.mbox)
            .finish_non_exhaustive()
    }
}

impl StatsController {
    /// The multi-consumer mbox the quantities are sent to.
    pub fn mbox(&self) -> Mbox {
        self.0.mbox.clone()
    }

    /// Whether distribution is on.
    pub fn is_on(&self) -> bool {
        self.0.state.lock().on
    }

    /// The period between distributions (default 2 s). Wakes a waiting distribution, which
    /// then follows the new period.
    pub fn set_distribution_period(&self, period: Duration) {
        self.0.state.lock().period = Some(period);
        self.0.wake.notify_all();
    }

    /// Starts distributing (nothing if already on). The first distribution comes one
    /// period after.
    pub fn turn_on(&self) {
        let mut st = self.0.state.lock();
        if st.on {
            return;
        }
        st.on = true;
        st.generation += 1;
        let generation = st.generation;
        let core = self.0.clone();
        match std::thread::Builder::new()
            .name("agentbox-stats".into())
            .spawn(move || core.run(generation))
        {
            Ok(t) => st.thread = Some(t),
            Err(e) => {
                st.on = false;
                drop(st);
                if let Some(env) = self.0.env.upgrade() {
                    EnvLayer::log_error(&env.0, &format!("cannot start the stats thread: {e}"));
                }
            }
        }
    }

    /// Stops distributing; returns at once (a distribution under way completes).
    pub fn turn_off(&self) {
        let thread = {
            let mut st = self.0.state.lock();
            st.on = false;
            st.generation += 1;
            st.thread.take()
        };
        self.0.wake.notify_all();
        // Not joined here: turn_off may be called from a handler that the distribution
        // thread is waiting to deliver to. The thread sees the new generation and ends.
        drop(thread);
    }
}
