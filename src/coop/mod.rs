//! Cooperations: agents registered and deregistered as one unit.
//!
//! # Registration
//!
//! 1. Each agent's [`define`](crate::Agent::define) runs on the registering thread; a
//!    failure there (or of a binder) drops every agent of the coop, subscriptions included,
//!    and returns a [`RegisterError`].
//! 2. Every agent is bound to its dispatcher before any `on_start` runs; each agent's
//!    `on_start` is its first demand. Messages sent to an agent of the coop before its
//!    `on_start` wait for it.
//! 3. Registration notices ([`CoopRegistered`]) are sent when registration completes.
//!
//! # Deregistration
//!
//! 1. A deregistered coop's agents stop handling messages at once (queued ones are
//!    dropped); its children are deregistered first, with reason
//!    [`DeregReason::Parent`].
//! 2. Each agent's `on_finish` runs as its last demand; then it returns to its default
//!    state (its `on_exit` hooks run, leaf first, unless the coop goes because of a
//!    panic) and its subscriptions go.
//! 3. After the last agent finished, the coop is final: deregistration notices
//!    ([`CoopDeregistered`], with the reason) are sent, never before the registration
//!    notices and only once every agent of the coop has been dropped (each is dropped on
//!    its worker right after its `on_finish`), and the parent may finish.
//!
//! The full protocols, with their races, are written next to the code (`protocol.rs`).

mod protocol;

use std::fmt;
use std::sync::{Arc, Weak};

use smallvec::SmallVec;
use thiserror::Error;

pub(crate) use protocol::{register, CoopInner};

use crate::agent::{self, Agent, AgentRef, DefineError, ExecBox};
use crate::dispatcher::{BindError, Binder};
use crate::environment::Environment;
use crate::exception::ExceptionReaction;
use crate::mbox::{Mbox, Repr};

/// Why a coop was deregistered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeregReason {
    /// The coop finished its work.
    Normal,
    /// The environment is stopping.
    Shutdown,
    /// Its parent coop was deregistered.
    Parent,
    /// A handler panicked (or failed) and the exception reaction was `DeregisterCoop`.
    Panic,
    /// An application-defined reason.
    User(u32),
}

/// An agent added to a coop, with the binder it was added with (if any).
/// (An `AgentRef`, not the bare core: the binder takes `&AgentRef`, and wrapping a clone
/// per call cost two reference-count operations each.)
pub(crate) type Candidate = (AgentRef, ExecBox, Option<Binder>);

/// A coop being put together: add agents, set options, then register it with
/// [`Environment::register_coop`] (or build it inside
/// [`Environment::introduce_coop`]). Agents added to a coop that is dropped unregistered
/// are dropped too.
pub struct Coop {
    pub(crate) env: Environment,
    pub(crate) agents: Candidates,
    pub(crate) parent: Option<CoopHandle>,
    pub(crate) binder: Option<Binder>,
    pub(crate) reaction: ExceptionReaction,
    /// Registration and deregistration notificators, boxed for the coops that have them:
    /// without the two lists a `Coop` is 96 bytes, moved by a few register moves where
    /// 144 bytes took a `memcpy` call each (~30 instructions per spawn, callgrind).
    pub(crate) notify: Option<Box<Notificators>>,
}

/// A coop's notificators (see [`Coop::add_reg_notificator`]).
#[derive(Default)]
pub(crate) struct Notificators {
    pub(crate) reg: Vec<Mbox>,
    pub(crate) dereg: Vec<Mbox>,
}

/// The agents of a coop being put together. Dropped unregistered, each agent's
/// subscriptions are discarded first. (The drop lives here, not on [`Coop`], so that
/// registration can take a `Coop` apart by moving its fields out: no clone of the
/// environment handle and no drop of the emptied `Coop`, ~100 instructions per spawn.)
#[derive(Default)]
pub(crate) struct Candidates(pub(crate) SmallVec<[Candidate; 1]>);

impl Drop for Candidates {
    fn drop(&mut self) {
        for (_, mut exec, _) in self.0.drain(..) {
            exec.discard();
        }
    }
}

impl Coop {
    pub(crate) fn new(env: Environment, parent: Option<CoopHandle>) -> Self {
        Coop {
            env,
            agents: Candidates::default(),
            parent,
            binder: None,
            reaction: ExceptionReaction::Inherit,
            notify: None,
        }
    }

    /// Adds an agent bound with the coop's binder; returns its direct mbox. The agent's
    /// `define` runs at registration: until then it subscribes to nothing, so messages sent
    /// to the mbox before are not delivered (as in SObjectizer). Messages that arrive
    /// between `define` and binding wait and are handled after `on_start`.
    pub fn add_agent<A: Agent>(&mut self, agent: A) -> Mbox {
        self.add(agent, None)
    }

    /// Adds an agent whose [thread-safe handlers](crate::SubscriptionBuilder::event_thread_safe)
    /// may run in parallel on `adv_thread_pool` (everywhere else it behaves as
    /// [`add_agent`](Self::add_agent)); its other demands run alone. Returns its direct
    /// mbox.
    pub fn add_thread_safe_agent<A: Agent + Sync>(&mut self, agent: A) -> Mbox {
        let (core, exec) = agent::create_thread_safe(agent, &self.env);
        let mbox = Mbox(Repr::Direct(core.clone()));
        self.agents.0.push((AgentRef(core), exec, None));
        mbox
    }

    /// Adds an agent bound with its own `binder`; returns its direct mbox.
    pub fn add_agent_with_binder<A: Agent>(&mut self, agent: A, binder: Binder) -> Mbox {
        self.add(agent, Some(binder))
    }

    fn add<A: Agent>(&mut self, agent: A, binder: Option<Binder>) -> Mbox {
        let (core, exec) = agent::create(agent, &self.env);
        let mbox = Mbox(Repr::Direct(core.clone()));
        self.agents.0.push((AgentRef(core), exec, binder));
        mbox
    }

    /// The binder for agents added without one (default: the environment's default
    /// `one_thread` dispatcher).
    pub fn set_binder(&mut self, binder: Binder) -> &mut Self {
        self.binder = Some(binder);
        self
    }

    /// The exception reaction for agents that inherit theirs (default: inherit from the
    /// parent coop, then the environment).
    pub fn set_exception_reaction(&mut self, reaction: ExceptionReaction) -> &mut Self {
        self.reaction = reaction;
        self
    }

    /// Sends [`CoopRegistered`] to `mbox` once the coop is registered.
    pub fn add_reg_notificator(&mut self, mbox: &Mbox) -> &mut Self {
        self.notify.get_or_insert_default().reg.push(mbox.clone());
        self
    }

    /// Sends [`CoopDeregistered`] to `mbox` once the coop is completely deregistered (every
    /// agent finished and dropped).
    pub fn add_dereg_notificator(&mut self, mbox: &Mbox) -> &mut Self {
        self.notify.get_or_insert_default().dereg.push(mbox.clone());
        self
    }

    /// The parent coop, if this is a child coop.
    pub fn parent(&self) -> Option<&CoopHandle> {
        self.parent.as_ref()
    }

    /// Number of agents added so far.
    pub fn len(&self) -> usize {
        self.agents.0.len()
    }

    /// Whether no agent has been added.
    pub fn is_empty(&self) -> bool {
        self.agents.0.is_empty()
    }
}

impl fmt::Debug for Coop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coop")
            .field("agents", &self.agents.0.len())
            .finish()
    }
}

/// A handle to a registered coop. Weak: it does not keep the coop alive.
#[derive(Clone)]
pub struct CoopHandle {
    id: u64,
    inner: Weak<CoopInner>,
}

impl CoopHandle {
    pub(crate) fn from_inner(inner: &Arc<CoopInner>) -> Self {
        CoopHandle {
            id: inner.id,
            inner: Arc::downgrade(inner),
        }
    }

    pub(crate) fn upgrade(&self) -> Option<Arc<CoopInner>> {
        self.inner.upgrade()
    }

    /// The coop's unique id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Starts deregistering the coop (nothing if it is already going or gone).
    pub fn deregister(&self, reason: DeregReason) {
        if let Some(c) = self.inner.upgrade() {
            c.deregister(reason);
        }
    }

    /// Whether the coop is registered and not deregistering.
    pub fn is_registered(&self) -> bool {
        self.inner.upgrade().is_some_and(|c| c.is_registered())
    }
}

impl PartialEq for CoopHandle {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for CoopHandle {}

impl fmt::Debug for CoopHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Coop({})", self.id)
    }
}

/// Sent to a coop's registration notificators once it is registered.
#[derive(Debug, Clone)]
pub struct CoopRegistered {
    /// The coop.
    pub coop: CoopHandle,
}

/// Sent to a coop's deregistration notificators once it is completely deregistered (all
/// its agents finished, all its children gone).
#[derive(Debug, Clone)]
pub struct CoopDeregistered {
    /// The coop (no longer alive).
    pub coop: CoopHandle,
    /// Why it was deregistered.
    pub reason: DeregReason,
}

/// Why a coop could not be registered. Its agents are dropped.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The environment is stopping.
    #[error("the environment is shutting down")]
    ShuttingDown,
    /// The parent coop is gone or deregistering.
    #[error("the parent coop is not registered")]
    ParentNotRegistered,
    /// An agent's `define` failed.
    #[error("agent #{index} of the coop failed in define: {source}")]
    Define {
        /// The agent's position in the coop.
        index: usize,
        /// What failed.
        #[source]
        source: DefineError,
    },
    /// A dispatcher could not bind an agent.
    #[error(transparent)]
    Bind(#[from] BindError),
}
