//! The shared state of one system ([`SystemInner`], behind every [`ActorSystem`] handle)
//! and what the layers above share through it: the links deliveries carry
//! ([`SystemLink`]), the interconnect's hook ([`RemoteRouter`]), why a registration fails.
//! It knows no actor and no mailbox: the routing (`routing.rs`), the deliveries
//! (`delivery.rs`), the mailbox, the actors and the system's face (`system.rs`) build on it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use thiserror::Error;

use super::dead_letters::{DeadLetterReason, DeliveryCounters};
use super::event::EventType;
use super::handle::{DecodeFn, EventHandle};
use super::id::ActorId;
use super::pools::Pool;
use super::services::LocalServices;
use crate::harmonizer::Harmonizer;
use crate::stats::SourceReg;
use crate::{AgentRef, Environment, Mbox, RegisterError};

/// Why an actor could not be registered.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RegisterActorError {
    /// No pool has this name.
    #[error("no pool is named {0:?}")]
    UnknownPool(String),
    /// The system is stopping.
    #[error("the actor system is stopping")]
    ShuttingDown,
    /// All 2^32 hints of the pool are in use.
    #[error("the pool's actor table is full")]
    TableFull,
    /// The core refused the actor's coop (e.g. the environment is stopping).
    #[error(transparent)]
    Coop(#[from] RegisterError),
}

/// One node of YDB's actor model: pools of threads running actors, addressed by
/// [`ActorId`], on an [`Environment`]. A cheap handle (clones share the system).
///
/// Many systems (nodes) may live in one environment or process; each has its own node id,
/// pools, actor tables, services and dead letters. Sending from outside any actor
/// ([`send`](Self::send)) uses the empty id as the sender.
///
/// # Routing of a send
///
/// 1. A recipient on another node (node id ≠ 0 and ≠ this node's) goes to the
///    interconnect: the session to that node once an `interconnect::Interconnect` is
///    started on this system (feature `interconnect`), else the local service
///    [`ActorId::interconnect_proxy`] of that node if one is registered; without either,
///    or for a node the interconnect does not know, the event is not delivered with
///    reason `Disconnected`.
/// 2. A service id is resolved once through the local services (whole 16 bytes); not
///    found: not delivered (`ActorUnknown`).
/// 3. The pool id and the hint find the slot, the local id must match: the event is queued
///    to the actor's mailbox. Otherwise: not delivered (`ActorUnknown`).
///
/// # Non-delivery (YDB's rules)
///
/// 1. With `FORWARD_ON_NONDELIVERY` the event goes to the handle's forward target, with
///    `FORWARD_ON_NONDELIVERY` and `SUBSCRIBE_ON_SESSION` cleared.
/// 2. Else with `TRACK_DELIVERY` the sender gets [`Undelivered`](super::Undelivered)
///    `{source_type, reason, unsure: false}` from the recipient's id, with the same cookie
///    and channel, `TRACK_DELIVERY`, `SUBSCRIBE_ON_SESSION` and
///    `GENERATE_UNSURE_UNDELIVERED` cleared; the event itself is a dead letter.
/// 3. Else the event is a dead letter.
///
/// This holds for unknown ids, actors that passed away, and events still queued when their
/// actor passes away. Every dead letter is sent as a [`DeadLetter`](super::DeadLetter) to
/// [`dead_letters`](Self::dead_letters) and counted in [`stats`](Self::stats).
///
/// # Examples
///
/// ```
/// use agentbox::actors::*;
/// use agentbox::{ActorId, Environment};
///
/// Environment::launch(|env| {
///     let system = ActorSystem::start(env, SystemSetup::new(7)).unwrap();
///     // Nobody lives there: the event becomes a dead letter (and nothing panics).
///     system.send(ActorId::new(7, 12345, 0), Wakeup { tag: 1 });
///     assert_eq!(system.stats().dead_letters, 1);
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct ActorSystem(pub(crate) Arc<SystemInner>);

/// The shared state of one system.
pub(crate) struct SystemInner {
    /// The harmonizer of the system's elastic pools (`SystemSetup::harmonize`). First, so
    /// that it is dropped first: it removes its ticks and the shared threads' lend targets
    /// before the pools go (a lender inside another pool's slice could otherwise hold that
    /// pool's last reference and join its threads from a worker of its own pool).
    pub(super) harmonizer: Option<Harmonizer>,
    pub(crate) node_id: u32,
    pub(crate) env: Environment,
    pub(crate) pools: Vec<Pool>,
    pub(crate) services: LocalServices,
    pub(super) next_local: AtomicU64,
    pub(crate) dead_letters: Mbox,
    pub(crate) counters: DeliveryCounters,
    pub(super) stopping: AtomicBool,
    pub(crate) me: Weak<SystemInner>,
    /// What deliveries carry (see `SystemLink`): uncounted, counted.
    pub(crate) link: &'static [SystemLink; 2],
    /// Holds the system's stats source (the stats controller holds it weakly).
    pub(super) stats_reg: SourceReg,
    /// Whether the source is registered with the environment (by the first mailbox).
    pub(super) stats_registered: AtomicBool,
    /// Where events for other nodes go, once an interconnect is installed.
    pub(crate) remote: OnceLock<Box<dyn RemoteRouter>>,
}

/// The hook of the interconnect: takes the events whose recipient is on another node
/// (routing step 1), or gives one back when that node cannot be reached now (the event is
/// then not delivered, reason `Disconnected`).
pub(crate) trait RemoteRouter: Send + Sync {
    /// Takes `h`, whose recipient (or its service's actor) is on node `node_id`.
    fn send(&self, h: EventHandle, node_id: u32) -> Result<(), EventHandle>;
    /// [`send`](Self::send) of a local event given apart from its handle: `header` has
    /// the fields and no event, `event` is the value, encoded here without being boxed.
    /// On `Err(reason)` nothing was queued: the caller reports the event not delivered
    /// (`Disconnected` where `send` gives the handle back).
    fn send_value(
        &self,
        header: &EventHandle,
        event: &(dyn std::any::Any + Send),
        node_id: u32,
    ) -> Result<(), DeadLetterReason>;
    /// Whether events of `event_type` can leave this node (a codec is registered).
    fn can_encode(&self, event_type: EventType) -> bool;
    /// Encodes a local event of `event_type` on the caller's thread (a remote mbox's send
    /// of a shared message): its bytes and decoder, or `None` without a codec or when the
    /// codec fails.
    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    fn encode(
        &self,
        event_type: EventType,
        event: &(dyn std::any::Any + Send),
    ) -> Option<(Vec<u8>, DecodeFn)>;
}

/// What a [`Delivery`] knows of its system: a weak reference, reached through a link that
/// lives as long as the process (one small allocation per system, never freed), so that a
/// delivery carries a plain reference instead of counting one per event. Only a delivery
/// dropped unhandled upgrades it.
///
/// A system has two: one for deliveries counted in their pool's queue length and one for
/// the rest (see [`SystemLink::pair`]), so that a delivery carries that flag in its link.
pub(crate) struct SystemLink {
    pub(crate) sys: Weak<SystemInner>,
    /// Whether the deliveries of this link are in their pool's queue-length count.
    pub(super) counted: bool,
}

impl SystemLink {
    /// A system's two links, uncounted then counted (never freed: a few words a system).
    pub(crate) fn pair(sys: Weak<SystemInner>) -> &'static [SystemLink; 2] {
        Box::leak(Box::new([
            SystemLink {
                sys: sys.clone(),
                counted: false,
            },
            SystemLink { sys, counted: true },
        ]))
    }
}

/// The link of deliveries that belong to no system (a mailbox's stop request).
pub(super) static DETACHED: SystemLink = SystemLink {
    sys: Weak::new(),
    counted: false,
};

impl SystemInner {
    #[inline]
    pub(crate) fn pool(&self, id: u32) -> &Pool {
        &self.pools[id as usize]
    }

    pub(crate) fn pool_id(&self, name: &str) -> Result<u32, RegisterActorError> {
        self.pools
            .iter()
            .find(|p| &*p.name == name)
            .map(|p| p.id)
            .ok_or_else(|| RegisterActorError::UnknownPool(name.to_owned()))
    }

    pub(super) fn arc(&self) -> Result<Arc<SystemInner>, RegisterActorError> {
        self.me.upgrade().ok_or(RegisterActorError::ShuttingDown)
    }

    /// A fresh id on `pool`, its slot reserved (resolving to nothing yet).
    pub(super) fn new_id(&self, pool: u32) -> Result<ActorId, RegisterActorError> {
        self.new_id_with(pool, None)
    }

    /// [`new_id`](Self::new_id) whose slot resolves to `mbox` at once, if given (one
    /// taking of the table's lock instead of two).
    pub(super) fn new_id_with(
        &self,
        pool: u32,
        mbox: Option<Mbox>,
    ) -> Result<ActorId, RegisterActorError> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(RegisterActorError::ShuttingDown);
        }
        let p = self
            .pools
            .get(pool as usize)
            .ok_or_else(|| RegisterActorError::UnknownPool(pool.to_string()))?;
        let local = self.next_local.fetch_add(1, Ordering::Relaxed);
        let hint = p
            .table
            .reserve_with(local, mbox)
            .ok_or(RegisterActorError::TableFull)?;
        Ok(ActorId::with_pool(self.node_id, pool, local, hint))
    }

    /// A fresh id on `pool` that resolves to `mbox` (a bridge endpoint: `crate::bridge`),
    /// which receives each event as a mutable `Delivery`.
    pub(crate) fn register_endpoint(
        &self,
        pool: u32,
        mbox: Mbox,
    ) -> Result<ActorId, RegisterActorError> {
        let id = self.new_id(pool)?;
        self.pool(pool).table.fill(id.hint(), id.local_id(), mbox);
        Ok(id)
    }

    /// The actor's id stops resolving.
    pub(crate) fn forget(&self, id: ActorId) {
        if let Some(p) = self.pools.get(id.pool_id() as usize) {
            p.table.remove(id.hint(), id.local_id());
        }
    }

    /// A counted event left its pool's queue without reaching an actor.
    pub(crate) fn dequeued(&self, rewrite: ActorId) {
        if let Some(p) = self.pools.get(rewrite.pool_id() as usize) {
            p.dequeued.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Why an event queued for a mailbox that no longer takes it was lost.
    pub(crate) fn loss_reason(&self) -> DeadLetterReason {
        if self.stopping.load(Ordering::Acquire) || self.env.is_shutting_down() {
            DeadLetterReason::Shutdown
        } else {
            DeadLetterReason::PassedAway
        }
    }

    pub(crate) fn register_stats(&self, agent: &AgentRef) {
        self.stats_reg.register(&agent.0.env);
        self.stats_registered.store(true, Ordering::Release);
    }

    #[inline]
    pub(crate) fn stats_registered(&self) -> bool {
        self.stats_registered.load(Ordering::Acquire)
    }
}
