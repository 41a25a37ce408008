//! [`ActorSystem`]: one node's actors, pools and local services on an environment.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use thiserror::Error;

use super::actor::{Actor, ActorContext};
use super::dead_letters::{DeadLetterReason, DeliveryCounters};
use super::event::Event;
use super::flags::EventFlags;
use super::handle::EventHandle;
use super::id::ActorId;
use super::mailbox::{Cell, Delivery, Hosted, MailboxAgent, SystemLink};
use super::pools::{Pool, PoolConfig, PoolStats};
use super::routing::Route;
use super::services::{LocalServices, ServiceError};
use super::setup::{SystemError, SystemSetup};
use crate::harmonizer::Harmonizer;
use crate::stats::{Quantity, SourceReg, StatsSource};
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

/// A snapshot of a system's figures ([`ActorSystem::stats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemStats {
    /// The node id.
    pub node_id: u32,
    /// Dead letters published.
    pub dead_letters: u64,
    /// `Undelivered` notifications generated (for events with `TRACK_DELIVERY`).
    pub undelivered: u64,
    /// Events forwarded on non-delivery (`FORWARD_ON_NONDELIVERY`).
    pub forwarded: u64,
    /// Per pool, by pool id.
    pub pools: Vec<PoolStats>,
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

// Pinned auto traits: the system handle is shared across threads, handles and contexts
// travel with their events and actors.
const _: fn() = || {
    fn shared<T: Send + Sync + Clone>() {}
    fn sent<T: Send>() {}
    shared::<ActorSystem>();
    sent::<EventHandle>();
    struct Probe;
    impl Actor for Probe {
        fn bootstrap(&mut self, _: &mut ActorContext<Self>, _: ActorId) {}
    }
    sent::<ActorContext<Probe>>();
};

/// The shared state of one system.
pub(crate) struct SystemInner {
    /// The harmonizer of the system's elastic pools (`SystemSetup::harmonize`). First, so
    /// that it is dropped first: it removes its ticks and the shared threads' lend targets
    /// before the pools go (a lender inside another pool's slice could otherwise hold that
    /// pool's last reference and join its threads from a worker of its own pool).
    harmonizer: Option<Harmonizer>,
    pub(crate) node_id: u32,
    pub(crate) env: Environment,
    pub(crate) pools: Vec<Pool>,
    pub(crate) services: LocalServices,
    next_local: AtomicU64,
    pub(crate) dead_letters: Mbox,
    pub(crate) counters: DeliveryCounters,
    stopping: AtomicBool,
    pub(crate) me: Weak<SystemInner>,
    /// What deliveries carry (see `SystemLink`): uncounted, counted.
    pub(crate) link: &'static [SystemLink; 2],
    /// Holds the system's stats source (the stats controller holds it weakly).
    stats_reg: SourceReg,
    /// Whether the source is registered with the environment (by the first mailbox).
    stats_registered: AtomicBool,
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
    ) -> Result<(), super::DeadLetterReason>;
    /// Whether events of `event_type` can leave this node (a codec is registered).
    fn can_encode(&self, event_type: super::EventType) -> bool;
    /// Encodes a local event of `event_type` on the caller's thread (a remote mbox's send
    /// of a shared message): its bytes and decoder, or `None` without a codec or when the
    /// codec fails.
    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    fn encode(
        &self,
        event_type: super::EventType,
        event: &(dyn std::any::Any + Send),
    ) -> Option<(Vec<u8>, super::handle::DecodeFn)>;
}

impl ActorSystem {
    /// Starts a system on `env`: builds the pools, registers the local services, runs the
    /// start functions.
    ///
    /// # Errors
    ///
    /// [`SystemError`]; a system that fails to start stops what it started.
    pub fn start(env: &Environment, setup: SystemSetup) -> Result<ActorSystem, SystemError> {
        let node_id = setup.node_id;
        if node_id == 0 || node_id > ActorId::MAX_NODE_ID {
            return Err(SystemError::InvalidNodeId(node_id));
        }
        let mut configs = setup.pools;
        if configs.is_empty() {
            configs.push(PoolConfig::new(PoolConfig::USER));
        }
        if configs.len() > ActorId::MAX_POOL_ID as usize + 1 {
            return Err(SystemError::TooManyPools(configs.len()));
        }
        let mut pools = Vec::with_capacity(configs.len());
        for (i, cfg) in configs.iter().enumerate() {
            if configs[..i].iter().any(|c| c.name() == cfg.name()) {
                return Err(SystemError::DuplicatePool(cfg.name().to_owned()));
            }
            let id = u32::try_from(i).unwrap_or(u32::MAX);
            let pool = Pool::start(node_id, id, cfg).map_err(|source| SystemError::Pool {
                pool: cfg.name().to_owned(),
                source,
            })?;
            pools.push(pool);
        }
        let harmonizer = match setup.harmonizer {
            Some(mut builder) => {
                let mut any = false;
                for pool in &pools {
                    if let Some(elastic) = pool.elastic() {
                        builder = builder.pool(elastic);
                        any = true;
                    }
                }
                match any {
                    true => Some(builder.build().map_err(SystemError::Harmonizer)?),
                    false => None,
                }
            }
            None => None,
        };
        let first = setup.first_local_id.unwrap_or_else(|| {
            let secs = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            (secs << 32).max(1)
        });
        let inner = Arc::new_cyclic(|me: &Weak<SystemInner>| {
            let source: Arc<dyn StatsSource> = Arc::new(SystemStatsSource(me.clone()));
            SystemInner {
                node_id,
                env: env.clone(),
                pools,
                services: LocalServices::default(),
                next_local: AtomicU64::new(first),
                dead_letters: env.create_mbox(),
                counters: DeliveryCounters::default(),
                stopping: AtomicBool::new(false),
                me: me.clone(),
                link: SystemLink::pair(me.clone()),
                stats_reg: SourceReg::new(source),
                stats_registered: AtomicBool::new(false),
                remote: OnceLock::new(),
                harmonizer,
            }
        });
        let system = ActorSystem(inner);
        for (service, pool, factory) in setup.services {
            if !service.is_service() {
                system.stop();
                return Err(ServiceError::NotAService(service).into());
            }
            let registered = system
                .0
                .pool_id(&pool)
                .and_then(|p| factory(&system, p))
                .and_then(|actor| {
                    system
                        .register_local_service(service, actor)
                        .map_err(|_| RegisterActorError::ShuttingDown)
                });
            if let Err(source) = registered {
                system.stop();
                return Err(SystemError::ServiceActor { service, source });
            }
        }
        for f in setup.on_start {
            f(&system);
        }
        Ok(system)
    }

    /// The node id.
    pub fn node_id(&self) -> u32 {
        self.0.node_id
    }

    /// The environment the system runs on.
    pub fn environment(&self) -> &Environment {
        &self.0.env
    }

    /// Registers `actor` on pool 0 with a mailbox of its own; its parent is the empty id.
    ///
    /// # Errors
    ///
    /// [`RegisterActorError`].
    pub fn register<A: Actor>(&self, actor: A) -> Result<ActorId, RegisterActorError> {
        self.0.register(0, actor, ActorId::EMPTY)
    }

    /// Registers `actor` on the pool named `pool`.
    ///
    /// # Errors
    ///
    /// [`RegisterActorError`].
    pub fn register_on<A: Actor>(
        &self,
        pool: &str,
        actor: A,
    ) -> Result<ActorId, RegisterActorError> {
        let pool = self.0.pool_id(pool)?;
        self.0.register(pool, actor, ActorId::EMPTY)
    }

    /// The id of the pool named `name`.
    pub fn pool_id(&self, name: &str) -> Option<u32> {
        self.0.pool_id(name).ok()
    }

    /// Sends `event` to `recipient` from outside any actor (the sender is empty).
    pub fn send<E: Event>(&self, recipient: ActorId, event: E) {
        self.0
            .send_event(recipient, ActorId::EMPTY, event, EventFlags::empty(), 0);
    }

    /// Sends `event` with `flags` and `cookie`, from `sender` (may be empty).
    pub fn send_with<E: Event>(
        &self,
        recipient: ActorId,
        sender: ActorId,
        event: E,
        flags: EventFlags,
        cookie: u64,
    ) {
        self.0.send_event(recipient, sender, event, flags, cookie);
    }

    /// Sends a handle as it is.
    pub fn send_handle(&self, handle: EventHandle) {
        self.0.send(handle);
    }

    /// Where a send to `id` would go now (see the routing rules above).
    pub fn route(&self, id: ActorId) -> Route {
        self.0.route(id)
    }

    /// Whether `id` resolves to a live actor of this system (directly or as a service).
    pub fn is_registered(&self, id: ActorId) -> bool {
        matches!(self.0.route(id), Route::Local(_))
    }

    /// Makes `actor` the local service `service`, replacing any previous one; returns the
    /// actor that served it before.
    ///
    /// # Errors
    ///
    /// [`ServiceError`] unless `service` is a service id and `actor` a plain, set id.
    pub fn register_local_service(
        &self,
        service: ActorId,
        actor: ActorId,
    ) -> Result<Option<ActorId>, ServiceError> {
        self.0.services.register(service, actor)
    }

    /// The actor serving `service` (compared on all 16 bytes, node included).
    pub fn lookup_local_service(&self, service: ActorId) -> Option<ActorId> {
        self.0.services.lookup(service)
    }

    /// Removes the local service `service`; returns the actor that served it.
    pub fn clear_local_service(&self, service: ActorId) -> Option<ActorId> {
        self.0.services.clear(service)
    }

    /// The local services registered now, as `(service id, actor id)` pairs sorted by
    /// service id (a snapshot, read-only).
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::actors::*;
    /// use agentbox::{ActorId, Environment};
    ///
    /// struct Idle;
    /// impl Actor for Idle {
    ///     fn bootstrap(&mut self, _: &mut ActorContext<Self>, _: ActorId) {}
    /// }
    ///
    /// Environment::launch(|env| {
    ///     let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
    ///     let actor = system.register(Idle).unwrap();
    ///     let service = ActorId::service(1, b"idle").unwrap();
    ///     system.register_local_service(service, actor).unwrap();
    ///     assert_eq!(system.local_services(), vec![(service, actor)]);
    ///     system.stop();
    ///     env.stop();
    /// }).unwrap();
    /// ```
    pub fn local_services(&self) -> Vec<(ActorId, ActorId)> {
        self.0.services.snapshot()
    }

    /// Removes the local service `service` only if `actor` serves it; returns whether it
    /// did.
    pub fn clear_local_service_if(&self, service: ActorId, actor: ActorId) -> bool {
        self.0.services.clear_if(service, actor)
    }

    /// The multi-consumer mbox every [`DeadLetter`](super::DeadLetter) of this system is sent
    /// to.
    pub fn dead_letters(&self) -> Mbox {
        self.0.dead_letters.clone()
    }

    /// The system's figures now. They are also distributed by the environment's stats
    /// controller under `ydb/node<N>` (`dead_letters.count`, `undelivered.count`,
    /// `forwarded.count`) and `ydb/node<N>/pool/<name>` (`actor.count`, `events.handled`,
    /// `queue.length`, `threads.count`, `work.total_ns`, `idle.total_ns`), once an actor
    /// has been registered.
    pub fn stats(&self) -> SystemStats {
        let c = &self.0.counters;
        SystemStats {
            node_id: self.0.node_id,
            dead_letters: c.dead_letters.load(Ordering::Relaxed),
            undelivered: c.undelivered.load(Ordering::Relaxed),
            forwarded: c.forwarded.load(Ordering::Relaxed),
            pools: self.0.pools.iter().map(Pool::stats).collect(),
        }
    }

    /// The harmonizer of the system's elastic pools, if the setup asked for one
    /// ([`SystemSetup::harmonize`]) and a pool is elastic; its
    /// [`stats`](Harmonizer::stats) show each pool's thread counts and operations.
    pub fn harmonizer(&self) -> Option<&Harmonizer> {
        self.0.harmonizer.as_ref()
    }

    /// The figures of pool `pool_id`.
    pub fn pool_stats(&self, pool_id: u32) -> Option<PoolStats> {
        self.0.pools.get(pool_id as usize).map(Pool::stats)
    }

    /// Stops the system: registering fails from now on, and every mailbox deregisters after
    /// the events already queued for it (later ones are not delivered, reason
    /// [`Shutdown`](DeadLetterReason::Shutdown)). Returns at once.
    pub fn stop(&self) {
        self.0.stopping.store(true, Ordering::Release);
        for pool in &self.0.pools {
            for m in pool.table.mailboxes() {
                let _ = m.send_mutable(Delivery::stop());
            }
        }
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopping(&self) -> bool {
        self.0.stopping.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for ActorSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ActorSystem(node {})", self.0.node_id)
    }
}

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

    fn arc(&self) -> Result<Arc<SystemInner>, RegisterActorError> {
        self.me.upgrade().ok_or(RegisterActorError::ShuttingDown)
    }

    /// A fresh id on `pool`, its slot reserved (resolving to nothing yet).
    fn new_id(&self, pool: u32) -> Result<ActorId, RegisterActorError> {
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
            .reserve(local)
            .ok_or(RegisterActorError::TableFull)?;
        Ok(ActorId::with_pool(self.node_id, pool, local, hint))
    }

    /// Registers `actor` with a mailbox of its own on `pool`.
    ///
    /// 1. A local id and a slot (hint) are reserved.
    /// 2. The mailbox agent is made and its slot filled with its mbox, so that the actor's
    ///    bootstrap can already reach itself.
    /// 3. Its coop is registered on the pool's dispatcher; on failure the slot is freed.
    pub(crate) fn register<A: Actor>(
        &self,
        pool: u32,
        actor: A,
        parent: ActorId,
    ) -> Result<ActorId, RegisterActorError> {
        let sys = self.arc()?;
        let id = self.new_id(pool)?;
        let p = self.pool(pool);
        let cell = Cell::new(actor, ActorContext::new(sys.clone(), id), parent);
        let agent = MailboxAgent::new(sys, pool, cell);
        let mut coop = self.env.make_coop();
        coop.set_binder(p.binder.clone());
        let mbox = coop.add_agent(agent);
        let mbox_for_stop = mbox.clone();
        p.table.fill(id.hint(), id.local_id(), mbox);
        match self.env.register_coop(coop) {
            Ok(_) => {
                // A stop that began after `new_id`'s check did not see this mailbox.
                if self.stopping.load(Ordering::Acquire) {
                    let _ = mbox_for_stop.send_mutable(Delivery::stop());
                }
                Ok(id)
            }
            Err(e) => {
                p.table.remove(id.hint(), id.local_id());
                Err(e.into())
            }
        }
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

    /// An actor for an existing mailbox (`register_with_same_mailbox`); it resolves at
    /// once.
    pub(crate) fn host_in_mailbox<A: Actor>(
        &self,
        pool: u32,
        actor: A,
        parent: ActorId,
        mailbox: Mbox,
    ) -> Result<Box<dyn Hosted>, RegisterActorError> {
        let sys = self.arc()?;
        let id = self.new_id(pool)?;
        let mut ctx = ActorContext::new(sys, id);
        ctx.mailbox = Some(mailbox.clone());
        self.pool(pool)
            .table
            .fill(id.hint(), id.local_id(), mailbox);
        Ok(Box::new(Cell::new(actor, ctx, parent)))
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

/// The system's figures for the environment's stats controller.
struct SystemStatsSource(Weak<SystemInner>);

impl StatsSource for SystemStatsSource {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        let Some(sys) = self.0.upgrade() else { return };
        let prefix = format!("ydb/node{}", sys.node_id);
        let c = &sys.counters;
        let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        for (suffix, v) in [
            ("dead_letters.count", &c.dead_letters),
            ("undelivered.count", &c.undelivered),
            ("forwarded.count", &c.forwarded),
        ] {
            out(Quantity {
                prefix: prefix.clone(),
                suffix,
                value: n(v.load(Ordering::Relaxed)),
            });
        }
        for pool in &sys.pools {
            let s = pool.stats();
            let prefix = format!("{prefix}/pool/{}", s.name);
            let ns = |d: std::time::Duration| usize::try_from(d.as_nanos()).unwrap_or(usize::MAX);
            for (suffix, value) in [
                ("actor.count", s.actors),
                ("threads.count", s.threads),
                ("events.handled", n(s.events_handled)),
                ("queue.length", n(s.queue_length)),
                ("work.total_ns", ns(s.work)),
                ("idle.total_ns", ns(s.idle)),
            ] {
                out(Quantity {
                    prefix: prefix.clone(),
                    suffix,
                    value,
                });
            }
        }
    }
}
