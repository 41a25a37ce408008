//! [`SystemSetup`]: what a system is made of, and [`SystemError`]: why it could not start.

use thiserror::Error;

use super::actor::Actor;
use super::id::ActorId;
use super::inner::{ActorSystem, RegisterActorError};
use super::pools::PoolConfig;
use super::services::ServiceError;
use crate::dispatcher::BuildError;
use crate::harmonizer::{HarmonizerBuilder, HarmonizerError};

/// Registers a service's actor at start: gets the system and the pool id.
pub(crate) type ServiceFactory =
    Box<dyn FnOnce(&ActorSystem, u32) -> Result<ActorId, RegisterActorError> + Send>;
/// Runs once at start, after the services are registered.
pub(crate) type StartFn = Box<dyn FnOnce(&ActorSystem) + Send>;

/// What an [`ActorSystem`] is made of: its node id, pools, local services and what to run at
/// start.
///
/// # Examples
///
/// ```
/// use agentbox::actors::{PoolConfig, SystemSetup};
///
/// let setup = SystemSetup::new(3)
///     .pool(PoolConfig::new(PoolConfig::SYSTEM))
///     .pool(PoolConfig::new(PoolConfig::USER).threads(2))
///     .on_start(|system| println!("node {} is up", system.node_id()));
/// assert_eq!(setup.node_id(), 3);
/// ```
pub struct SystemSetup {
    pub(crate) node_id: u32,
    pub(crate) pools: Vec<PoolConfig>,
    pub(crate) services: Vec<(ActorId, String, ServiceFactory)>,
    pub(crate) on_start: Vec<StartFn>,
    pub(crate) first_local_id: Option<u64>,
    pub(crate) harmonizer: Option<HarmonizerBuilder>,
}

impl SystemSetup {
    /// A setup for node `node_id` (1..=[`ActorId::MAX_NODE_ID`]); without pools it gets one,
    /// `"User"`, of one thread.
    pub fn new(node_id: u32) -> SystemSetup {
        SystemSetup {
            node_id,
            pools: Vec::new(),
            services: Vec::new(),
            on_start: Vec::new(),
            first_local_id: None,
            harmonizer: None,
        }
    }

    /// The node id.
    pub fn node_id(&self) -> u32 {
        self.node_id
    }

    /// Adds a pool; pool ids are given in the order of these calls, from 0.
    pub fn pool(mut self, pool: PoolConfig) -> SystemSetup {
        self.pools.push(pool);
        self
    }

    /// Registers `actor` on pool `pool` at start and makes it the local service `service`.
    pub fn local_service<A: Actor>(
        mut self,
        service: ActorId,
        pool: impl Into<String>,
        actor: A,
    ) -> SystemSetup {
        let factory: ServiceFactory =
            Box::new(move |sys, pool| sys.0.register(pool, actor, ActorId::EMPTY));
        self.services.push((service, pool.into(), factory));
        self
    }

    /// Runs `f` at start, after the local services are registered (in the order added).
    pub fn on_start(mut self, f: impl FnOnce(&ActorSystem) + Send + 'static) -> SystemSetup {
        self.on_start.push(Box::new(f));
        self
    }

    /// Harmonizes the system's pools (YDB's harmonizer, see [`crate::harmonizer`]): at
    /// start every elastic pool (a pool configured with a range of threads) is added to
    /// `harmonizer`, in pool id order, and the system keeps the
    /// [`Harmonizer`](crate::harmonizer::Harmonizer) while it lives
    /// ([`ActorSystem::harmonizer`]). Pools of a fixed thread count are left as they are.
    /// Pass `Harmonizer::builder()` for YDB's defaults (period 1 s), with
    /// [`cpu_budget`](HarmonizerBuilder::cpu_budget) to set the budget.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::actors::{PoolConfig, SystemSetup};
    /// use agentbox::harmonizer::Harmonizer;
    ///
    /// let setup = SystemSetup::new(1)
    ///     .pool(PoolConfig::new(PoolConfig::USER))
    ///     .harmonize(Harmonizer::builder().cpu_budget(2.0));
    /// # let _ = setup;
    /// ```
    pub fn harmonize(mut self, harmonizer: HarmonizerBuilder) -> SystemSetup {
        self.harmonizer = Some(harmonizer);
        self
    }

    /// The local id of the first actor (default YDB's: `unix seconds << 32`); each later
    /// actor gets the next one. Local ids are never reused within the system.
    pub fn first_local_id(mut self, id: u64) -> SystemSetup {
        self.first_local_id = Some(id.max(1));
        self
    }
}

impl std::fmt::Debug for SystemSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemSetup")
            .field("node_id", &self.node_id)
            .field("pools", &self.pools)
            .field("services", &self.services.len())
            .field("on_start", &self.on_start.len())
            .field("harmonizer", &self.harmonizer)
            .finish()
    }
}

/// Why a system could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SystemError {
    /// The node id is 0 or does not fit in 20 bits.
    #[error("node id {0} is not in 1..=1048575")]
    InvalidNodeId(u32),
    /// Two pools have the same name.
    #[error("two pools are named {0:?}")]
    DuplicatePool(String),
    /// More pools than the 11 bits of a pool id hold.
    #[error("{0} pools; at most 2048")]
    TooManyPools(usize),
    /// A pool's dispatcher could not start.
    #[error("pool {pool:?}: {source}")]
    Pool {
        /// The pool.
        pool: String,
        /// Why.
        #[source]
        source: BuildError,
    },
    /// A local service's actor could not be registered.
    #[error("local service {service}: {source}")]
    ServiceActor {
        /// The service id.
        service: ActorId,
        /// Why.
        #[source]
        source: RegisterActorError,
    },
    /// The harmonizer of [`SystemSetup::harmonize`] could not be built.
    #[error("harmonizer: {0}")]
    Harmonizer(#[source] HarmonizerError),
    /// A local service id is not a service id.
    #[error(transparent)]
    Service(#[from] ServiceError),
}
