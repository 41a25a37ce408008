//! Dispatchers own the demand queues and the worker threads; agents are bound to one for
//! their whole life through a [`Binder`].
//!
//! | kind | threads | queue | ordering guarantee |
//! |---|---|---|---|
//! | [`one_thread`] | one | one FIFO for all its agents | global FIFO per sender |
//! | [`active_obj`] | one per agent | one FIFO per agent | FIFO per sender |
//! | [`active_group`] | one per named group | one FIFO per group | FIFO per sender |
//! | [`thread_pool`] | N | one FIFO per coop (default) or per agent | FIFO per queue |
//! | [`adv_thread_pool`] | N | one FIFO per agent | thread-safe handlers in parallel, others alone; FIFO start |
//! | [`strictly_ordered`] | one | a FIFO per priority | higher priority always first |
//! | [`quoted_round_robin`] | one | a FIFO per priority | sweeps P7→P0 with quotas |
//! | [`one_per_prio`] | one per priority | a FIFO per priority | FIFO per sender |
//!
//! Every dispatcher keeps the guarantees of the crate docs: an agent's handlers never run
//! concurrently, `on_start` runs first and `on_finish` last, and one sender's messages to
//! one receiver through one mbox are handled in send order.
//!
//! # Lifetime
//!
//! A dispatcher lives while its [`DispatcherHandle`], any [`Binder`] made from it, or any
//! agent bound to it is alive; after the last one goes, its threads are stopped and joined.

pub mod active_group;
pub mod active_obj;
pub(crate) mod activity;
pub(crate) mod adv_queue;
pub mod adv_thread_pool;
pub mod one_per_prio;
pub mod one_thread;
pub(crate) mod pool;
pub(crate) mod prio;
pub mod quoted_round_robin;
pub(crate) mod serial;
pub mod strictly_ordered;
pub mod thread_pool;

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

pub(crate) use table::{AgentKey, AgentTable, KeyAllocator};

use crate::agent::{AgentArc, AgentExec, AgentRef};
use crate::mbox::MboxId;
use crate::message::Message;

mod table;

/// One queued execution for one agent, named by its key on the queue's worker (no
/// reference count per message).
///
/// 32 bytes, the same for every kind: a message's mbox id and payload, or a reserved id for
/// the three control demands. An enum of the kinds was 56 bytes (the compiler cannot fold
/// the tag into a payload pointer when two variants carry data), and a backlog of small
/// messages is mostly demands.
pub(crate) struct Demand {
    pub(crate) key: AgentKey,
    /// The message's mbox, or one of the reserved ids `BIND`, `BIND_START`, `START`,
    /// `FINISH`, `STOP_WORKER`.
    mbox: MboxId,
    /// The message; for `Bind`, the agent's core; a placeholder signal for `Start`,
    /// `Finish` and the worker's stop (a `Message` has no spare bit pattern for an empty
    /// `Option`: its two representations use the one a pointer has).
    msg: Message,
}

/// Reserved mbox ids of the control demands (mbox ids count up from 1 and never get near).
/// The two binds are the two highest, so that `is_bind` is one comparison.
const BIND: MboxId = MboxId(u64::MAX);
/// A `Bind` whose worker runs the agent's `Start` right after taking it.
const BIND_START: MboxId = MboxId(u64::MAX - 1);
const START: MboxId = MboxId(u64::MAX - 2);
const FINISH: MboxId = MboxId(u64::MAX - 3);
/// The id of a demand for no agent that tells a serial worker to stop.
const STOP_WORKER: MboxId = MboxId(u64::MAX - 4);

/// What a demand asks for, to be queued. (An agent's first demand, the `Bind` that moves
/// its executor to the worker, is made by [`Demand::bind`].)
pub(crate) enum DemandKind {
    /// `on_start`: always the first demand an agent handles.
    Start,
    /// `on_finish`: always the last.
    Finish,
    /// A message from mbox `mbox`.
    Message { mbox: MboxId, msg: Message },
}

/// What a demand asks for, as the worker runs it (`Bind` is taken by the worker's table).
pub(crate) enum Run<'a> {
    /// Never run by an executor: the worker's table takes it.
    Bind,
    Start,
    Finish,
    Message {
        mbox: MboxId,
        msg: &'a Message,
    },
}

impl Demand {
    #[inline]
    pub(crate) fn new(key: AgentKey, kind: DemandKind) -> Demand {
        let (mbox, msg) = match kind {
            DemandKind::Message { mbox, msg } => return Demand::message(key, mbox, msg),
            DemandKind::Start => (START, Message::placeholder()),
            DemandKind::Finish => (FINISH, Message::placeholder()),
        };
        Demand { key, mbox, msg }
    }

    /// The `Bind` that moves an agent's executor to its worker, always the agent's first
    /// demand; with `starts`, a `BindStart`: the worker runs `Start` right after (for
    /// queues whose worker runs demands through an [`AgentTable`]; see
    /// [`EventQueue::starts_on_bind`]).
    ///
    /// The executor waits in the core (left there by `agent::core::activate`), and the
    /// message is the core itself: binding allocates nothing. The demand has no `Drop` of
    /// its own (one cost 5-15% on the message path: every recycle had to check it and leave
    /// a placeholder behind); an executor whose `Bind` is dropped unrun goes with its coop.
    pub(crate) fn bind(key: AgentKey, core: AgentArc, starts: bool) -> Demand {
        Demand {
            key,
            mbox: if starts { BIND_START } else { BIND },
            msg: Message::carrying(core),
        }
    }

    /// A message demand (what [`new`](Self::new) makes of `DemandKind::Message`).
    #[inline]
    pub(crate) fn message(key: AgentKey, mbox: MboxId, msg: Message) -> Demand {
        Demand { key, mbox, msg }
    }

    /// A demand for no agent that tells a serial worker to stop: its channel carries
    /// demands only, so that a channel slot is a demand's 32 bytes and no more (an enum of
    /// a demand and a stop command took 40, a demand having no spare bit pattern left).
    pub(crate) fn stop_worker() -> Demand {
        Demand {
            key: AgentKey::single(),
            mbox: STOP_WORKER,
            msg: Message::placeholder(),
        }
    }

    #[inline]
    pub(crate) fn is_stop_worker(&self) -> bool {
        self.mbox == STOP_WORKER
    }

    /// A `Bind`, with or without the `Start` after it.
    #[inline]
    pub(crate) fn is_bind(&self) -> bool {
        self.mbox.0 >= BIND_START.0
    }

    /// A `Bind` whose worker runs `Start` right after it.
    pub(crate) fn starts_after_bind(&self) -> bool {
        self.mbox == BIND_START
    }

    /// The agent and executor of a `Bind` demand; `None` for any other demand.
    pub(crate) fn take_bind(&mut self) -> Option<(AgentArc, Box<dyn AgentExec>)> {
        if !self.is_bind() {
            return None;
        }
        let core: AgentArc = self.msg.carried()?;
        let exec = core.take_over()?;
        Some((core, exec))
    }

    /// Done with the demand: its message's payload may be reused (see `Message::recycle`).
    #[inline]
    pub(crate) fn recycle(self) {
        self.msg.recycle();
    }

    /// What the demand asks the agent for.
    #[inline]
    pub(crate) fn run(&self) -> Run<'_> {
        // A message first, with one comparison: the reserved ids are the five highest.
        if self.mbox.0 < STOP_WORKER.0 {
            return Run::Message {
                mbox: self.mbox,
                msg: &self.msg,
            };
        }
        match self.mbox {
            START => Run::Start,
            FINISH => Run::Finish,
            _ => Run::Bind,
        }
    }
}

/// A queue a dispatcher gives to each bound agent.
pub(crate) trait EventQueue: Send + Sync {
    /// Queues one demand; never blocks. A queue whose worker has stopped drops it.
    fn push(&self, demand: Demand);

    /// Whether this queue's worker runs `Start` right after a `BindStart` (an agent is
    /// then bound and started by one demand, not two: spawning queues half the control
    /// demands). Queues whose worker runs demands through an [`AgentTable`] say yes.
    fn starts_on_bind(&self) -> bool {
        false
    }
}

/// What a dispatcher does for the coop registration protocol (see `coop`).
pub(crate) trait BinderImpl: Send + Sync {
    /// Reserves resources for `agent` (a thread, a queue); may fail. Runs for every agent
    /// of a coop before any agent is bound.
    fn preallocate(&self, agent: &AgentRef) -> Result<(), BindError>;
    /// Releases what `preallocate` reserved when the registration fails later.
    fn undo_preallocation(&self, agent: &AgentRef);
    /// Binds the agent: returns the queue its demands go to and its key there. Cannot fail.
    fn bind(&self, agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey);
    /// Called once after the agent's `on_finish`: on the environment's finalizer thread,
    /// or, if [`unbinds_anywhere`](Self::unbinds_anywhere), possibly on one of the
    /// dispatcher's own threads.
    fn unbind(&self, agent: &AgentRef, key: AgentKey);
    /// Whether `unbind` may run on any thread, the dispatcher's own included: it never
    /// joins or waits for a thread. Binders that keep a thread per agent or group say no.
    fn unbinds_anywhere(&self) -> bool {
        false
    }
}

/// Binds agents to the dispatcher it was made from; give it to a coop.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// use agentbox::dispatcher::one_thread;
///
/// struct Worker;
/// impl Agent for Worker {
///     fn on_start(&mut self, ctx: &mut Context<Self>) {
///         ctx.deregister_coop(DeregReason::Normal);
///     }
/// }
///
/// Environment::launch(|env| {
///     let disp = one_thread::Builder::new().name("io").build().unwrap();
///     env.introduce_coop(|coop| {
///         coop.set_binder(disp.binder());
///         coop.add_agent(Worker);
///     }).unwrap();
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct Binder(pub(crate) Arc<dyn BinderImpl>);

impl fmt::Debug for Binder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Binder")
    }
}

/// A handle to a running dispatcher, whatever its kind.
#[derive(Clone)]
pub struct DispatcherHandle {
    binder: Binder,
    with_params: Option<Arc<BinderFactory>>,
    name: Arc<str>,
    kind: &'static str,
}

type BinderFactory = dyn Fn(&BindParams) -> Binder + Send + Sync;

/// What a binder asks of its dispatcher; each kind reads the parameters that concern it
/// and ignores the others.
///
/// | parameter | read by |
/// |---|---|
/// | [`fifo`](Self::fifo) | `thread_pool` |
/// | [`group`](Self::group) | `active_group` |
#[derive(Clone, Debug, Default)]
pub struct BindParams {
    fifo: Fifo,
    group: Option<Arc<str>>,
}

impl BindParams {
    /// The defaults: [`Fifo::Cooperation`], no group.
    pub fn new() -> Self {
        BindParams::default()
    }

    /// The FIFO discipline of a thread pool (default [`Fifo::Cooperation`]).
    pub fn fifo(mut self, fifo: Fifo) -> Self {
        self.fifo = fifo;
        self
    }

    /// The group of an `active_group` dispatcher (default: the group named `""`).
    pub fn group(mut self, name: impl Into<Arc<str>>) -> Self {
        self.group = Some(name.into());
        self
    }

    pub(crate) fn fifo_value(&self) -> Fifo {
        self.fifo
    }

    pub(crate) fn group_name(&self) -> Arc<str> {
        self.group.clone().unwrap_or_else(|| Arc::from(""))
    }
}

/// How a thread pool queues the demands of the agents a binder binds.
///
/// What it means for parallelism: a queue is served by one pool thread at a time. With
/// [`Cooperation`](Fifo::Cooperation) (the default, as in SObjectizer) all the agents of a
/// coop share one queue, so a coop of many workers keeps only one thread busy however many
/// the pool has; use [`Individual`](Fifo::Individual), or one coop per worker, to spread
/// them over the pool's threads (`examples/round_robin_workers.rs` does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fifo {
    /// Agents of one coop bound with one binder share a queue: they never run in parallel
    /// and keep the order of demands across agents (the default).
    #[default]
    Cooperation,
    /// Each agent has a queue of its own: agents of one coop may run in parallel.
    Individual,
}

impl DispatcherHandle {
    pub(crate) fn new(kind: &'static str, name: Arc<str>, binder: Binder) -> Self {
        DispatcherHandle {
            binder,
            with_params: None,
            name,
            kind,
        }
    }

    pub(crate) fn with_params(
        mut self,
        factory: impl Fn(&BindParams) -> Binder + Send + Sync + 'static,
    ) -> Self {
        self.with_params = Some(Arc::new(factory));
        self
    }

    /// A binder with the default [`BindParams`].
    pub fn binder(&self) -> Binder {
        self.binder.clone()
    }

    /// A binder with the given parameters (kinds without parameters return
    /// [`binder`](Self::binder)).
    pub fn binder_with(&self, params: BindParams) -> Binder {
        match &self.with_params {
            Some(f) => f(&params),
            None => self.binder.clone(),
        }
    }

    /// The dispatcher's name (given to its builder, or made up).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kind, e.g. `"one_thread"`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }
}

impl fmt::Debug for DispatcherHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dispatcher({}/{})", self.kind, self.name)
    }
}

/// Why a dispatcher could not be built.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The OS refused a worker thread.
    #[error("cannot spawn a dispatcher thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// A builder parameter is out of range.
    #[error("invalid dispatcher parameter: {0}")]
    InvalidParameter(&'static str),
}

/// Why an agent could not be bound to a dispatcher.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BindError {
    /// The OS refused a thread the binding needed.
    #[error("cannot spawn a thread for the agent: {0}")]
    Spawn(#[source] std::io::Error),
    /// The dispatcher has been shut down.
    #[error("the dispatcher has been shut down")]
    Shutdown,
}

/// A binder that refuses every agent: what a stopped environment hands out.
pub(crate) fn stopped_binder() -> Binder {
    struct Stopped;
    impl BinderImpl for Stopped {
        fn preallocate(&self, _agent: &AgentRef) -> Result<(), BindError> {
            Err(BindError::Shutdown)
        }
        fn undo_preallocation(&self, _agent: &AgentRef) {}
        fn bind(&self, _agent: &AgentRef) -> (Arc<dyn EventQueue>, AgentKey) {
            unreachable!("preallocation always fails")
        }
        fn unbind(&self, _agent: &AgentRef, _key: AgentKey) {}
    }
    Binder(Arc::new(Stopped))
}

/// What every builder has: a name and activity tracking.
#[derive(Debug, Default, Clone)]
pub(crate) struct CommonParams {
    name: Option<String>,
    activity: bool,
}

impl CommonParams {
    /// The given name, or `<kind>-N` with N unique in the process.
    pub(crate) fn name(&self, kind: &str) -> Arc<str> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        match &self.name {
            Some(n) => n.as_str().into(),
            None => format!(
                "{kind}-{}",
                SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )
            .into(),
        }
    }

    pub(crate) fn activity(&self) -> bool {
        self.activity
    }
}

/// The `name` and `activity_tracking` setters of a builder with a `common: CommonParams`
/// field.
macro_rules! common_builder_methods {
    () => {
        /// The dispatcher's name, used in its threads' names and its stats prefix
        /// (default: `<kind>-N`).
        pub fn name(mut self, name: impl Into<String>) -> Self {
            self.common.name = Some(name.into());
            self
        }

        /// Whether its threads measure their working and waiting time for the stats
        /// controller (default: off, and then they never read the clock).
        pub fn activity_tracking(mut self, on: bool) -> Self {
            self.common.activity = on;
            self
        }
    };
}
pub(crate) use common_builder_methods;

#[cfg(test)]
mod tests {
    use super::*;

    /// A backlog of small messages is mostly demands: their size is the bytes per queued
    /// message the `queued_bytes_per_msg` benchmark measures.
    #[test]
    fn a_demand_is_32_bytes_whatever_its_kind() {
        assert_eq!(std::mem::size_of::<Demand>(), 32);
        let key = AgentKey::single();
        for kind in [DemandKind::Start, DemandKind::Finish] {
            let mut d = Demand::new(key, kind);
            assert!(!d.is_bind());
            assert!(d.take_bind().is_none());
        }
        assert!(matches!(
            Demand::new(key, DemandKind::Start).run(),
            Run::Start
        ));
        assert!(matches!(
            Demand::new(key, DemandKind::Finish).run(),
            Run::Finish
        ));
        let stop = Demand::stop_worker();
        assert!(stop.is_stop_worker() && !stop.is_bind());
        assert!(!stop.starts_after_bind());
        assert!(!Demand::new(key, DemandKind::Start).is_stop_worker());
        let msg = Message::new(7u32);
        let d = Demand::new(
            key,
            DemandKind::Message {
                mbox: MboxId(42),
                msg,
            },
        );
        match d.run() {
            Run::Message { mbox, msg } => {
                assert_eq!(mbox, MboxId(42));
                assert_eq!(msg.downcast_ref::<u32>(), Some(&7));
            }
            _ => panic!("a message demand runs as a message"),
        }
    }

    /// A `Bind` that is never run (its worker is gone) leaves the executor waiting in the
    /// agent's core, which drops it with itself (its coop drops it earlier: see the test
    /// in `coop::protocol`); one that is run hands it over exactly once.
    #[test]
    fn an_unrun_bind_leaves_the_executor_in_the_core_and_a_run_one_hands_it_over_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Counted(Arc<AtomicUsize>);
        impl crate::agent::Agent for Counted {}
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        crate::Environment::launch(|env| {
            let drops = Arc::new(AtomicUsize::new(0));
            let (core, exec) = crate::agent::create(Counted(drops.clone()), env);
            core.hand_over(exec);
            let bind = Demand::bind(AgentKey::single(), core.clone(), false);
            assert!(bind.is_bind() && !bind.starts_after_bind());
            assert!(matches!(bind.run(), Run::Bind));
            drop(bind);
            assert_eq!(drops.load(Ordering::SeqCst), 0, "waits in the core");
            drop(core);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped with the core");

            let (core, exec) = crate::agent::create(Counted(drops.clone()), env);
            core.hand_over(exec);
            let mut bind = Demand::bind(AgentKey::single(), core, false);
            let (core, exec) = bind.take_bind().expect("the executor, once");
            assert!(bind.take_bind().is_none());
            drop(bind);
            drop(core);
            assert_eq!(
                drops.load(Ordering::SeqCst),
                1,
                "not dropped by the spent demand or the core"
            );
            drop(exec);
            assert_eq!(drops.load(Ordering::SeqCst), 2);

            let (core, exec) = crate::agent::create(Counted(drops.clone()), env);
            core.hand_over(exec);
            let mut bind = Demand::bind(AgentKey::single(), core, true);
            assert!(bind.is_bind() && bind.starts_after_bind());
            assert!(matches!(bind.run(), Run::Bind), "never run as a message");
            let (_core, exec) = bind.take_bind().expect("the executor, once");
            drop(exec);
            assert_eq!(drops.load(Ordering::SeqCst), 3);
        })
        .unwrap();
    }
}
