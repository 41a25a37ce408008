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
//! On every dispatcher, a message queued for an agent is handled or counted in
//! [`DropCounts`](crate::DropCounts) (one queued behind the agent's `on_finish`, or left
//! when the worker stops, as `receiver_finished`), and a panic in user code a worker runs
//! outside a handler — the agent's `Drop`, a message payload's `Drop` — goes to the
//! agent's exception reaction or the error logger (see [`exception`](crate::exception)):
//! no worker thread dies of it.
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
pub mod elastic;
pub(crate) mod idle;
pub mod one_per_prio;
pub mod one_thread;
pub(crate) mod pool;
pub(crate) mod prio;
pub mod quoted_round_robin;
pub(crate) mod serial;
pub mod strictly_ordered;
pub mod thread_pool;
pub(crate) mod unwind;

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

pub(crate) use demand::{Demand, DemandKind, Run};
pub(crate) use table::{AgentKey, AgentTable, KeyAllocator};
pub(crate) use thread_pool::BlockedWorker;

use crate::agent::{AgentCore, AgentRef};
use crate::mbox::MboxId;
use crate::message::Message;

mod demand;
mod table;

/// A queue a dispatcher gives to each bound agent.
pub(crate) trait EventQueue: Send + Sync {
    /// Queues one demand; never blocks. A queue whose worker has stopped keeps it until the
    /// queue goes, and then drops and counts it (see `AgentTable::drop_unrun`).
    fn push(&self, demand: Demand);

    /// Queues a message demand for `agent`; as [`push`](Self::push) does. A queue run
    /// through an [`AgentTable`] may queue a message from the agent's own direct mbox
    /// inline ([`Demand::inline_if_to`]): the serial queue does, for pushes from other
    /// threads.
    ///
    /// The demand comes in pieces (key, mbox, message), not as a `Demand`: in registers,
    /// so that the send path's call to the queue can be its last step, a jump.
    #[inline]
    fn push_message(&self, key: AgentKey, mbox: MboxId, msg: Message, agent: &AgentCore) {
        let _ = agent;
        self.push(Demand::message(key, mbox, msg));
    }

    /// Whether this queue's worker runs `Start` right after a `BindStart` (an agent is
    /// then bound and started by one demand, not two: spawning queues half the control
    /// demands). Queues whose worker runs demands through an [`AgentTable`] say yes.
    fn starts_on_bind(&self) -> bool {
        false
    }

    /// Whether a demand queued here now could run only after the current thread returns
    /// from the demand it is running: the thread is the one that serves this queue (or
    /// holds it, in a pool) and it is busy. A blocking request to an agent on such a queue
    /// can never be answered ([`request_reply`](crate::request::request_reply) refuses it).
    /// `false` when unknown.
    fn blocked_by_current_thread(&self) -> bool {
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
    elastic: Option<Arc<dyn elastic::ElasticPool>>,
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
            elastic: None,
        }
    }

    /// Makes the handle answer [`elastic`](Self::elastic) with `pool`.
    pub(crate) fn with_elastic(mut self, pool: Arc<dyn elastic::ElasticPool>) -> Self {
        self.elastic = Some(pool);
        self
    }

    /// The dispatcher as an [`ElasticPool`](elastic::ElasticPool) (a hook for a
    /// harmonizer): `Some` for a `thread_pool` or `adv_thread_pool` built with thread
    /// limits, `None` for every other dispatcher.
    pub fn elastic(&self) -> Option<Arc<dyn elastic::ElasticPool>> {
        self.elastic.clone()
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

/// The builder of a dispatcher whose agents run on serial workers (`one_thread`,
/// `active_obj`, `active_group`): its struct (common parameters and a spin threshold), its
/// `new` and its setters. Each kind writes its own `build` in another `impl Builder`.
macro_rules! serial_builder {
    (doc: $doc:literal, new: $new:literal) => {
        #[doc = $doc]
        #[derive(Debug, Default, Clone)]
        pub struct Builder {
            common: $crate::dispatcher::CommonParams,
            spin: Option<std::time::Duration>,
        }

        impl Builder {
            #[doc = $new]
            pub fn new() -> Self {
                Builder::default()
            }

            $crate::dispatcher::common_builder_methods!();
            $crate::dispatcher::idle::spin_threshold_method!();
        }
    };
}
pub(crate) use serial_builder;
