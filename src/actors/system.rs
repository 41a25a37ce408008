//! [`ActorSystem`]: one node's actors, pools and local services on an environment.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use super::actor::{Actor, ActorContext};
use super::dead_letters::DeliveryCounters;
use super::delivery::Delivery;
use super::event::Event;
use super::flags::EventFlags;
use super::handle::EventHandle;
use super::id::ActorId;
use super::inner::{ActorSystem, RegisterActorError, SystemInner, SystemLink};
use super::pools::{Pool, PoolConfig, PoolStats};
use super::routing::Route;
use super::services::{LocalServices, ServiceError};
use super::setup::{SystemError, SystemSetup};
use crate::harmonizer::Harmonizer;
use crate::stats::{Quantity, SourceReg, StatsSource};
use crate::{Environment, Mbox};

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
    /// [`Shutdown`](super::DeadLetterReason::Shutdown)). Returns at once.
    pub fn stop(&self) {
        self.0.stopping.store(true, Ordering::Release);
        for pool in &self.0.pools {
            for m in pool.table.mailboxes() {
                let _ = m.send_mutable(Delivery::stop());
            }
            let parked = pool.idle.close();
            if !parked.is_empty() {
                self.0
                    .env
                    .idle_coops_changed(-i64::try_from(parked.len()).unwrap_or(i64::MAX));
            }
            for m in parked {
                let _ = m.mbox().send_mutable(Delivery::stop());
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
