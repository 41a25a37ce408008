//! Agent states: named, optionally nested, with initial substates and history.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use thiserror::Error;

/// States nest at most this many levels deep (a root state is level 1).
pub const MAX_STATE_NESTING: usize = 16;

/// What a composite state remembers of its substates when it is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum History {
    /// Entering the state enters its initial substate.
    #[default]
    None,
    /// Entering the state enters the direct substate active when it was last left (and that
    /// substate's own initial or history rules below it).
    Shallow,
    /// Entering the state enters the leaf state active when it was last left.
    Deep,
}

/// Errors of building states and switching between them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StateError {
    /// A substate would nest deeper than [`MAX_STATE_NESTING`].
    #[error("state {name} would nest deeper than {MAX_STATE_NESTING} levels")]
    TooDeep {
        /// The state's name.
        name: String,
    },
    /// The parent already has an initial substate.
    #[error("state {parent} already has an initial substate")]
    InitialAlreadySet {
        /// The parent's name.
        parent: String,
    },
    /// A composite state with no initial substate (and no history to use) was entered.
    #[error("composite state {name} has no initial substate")]
    NoInitialSubstate {
        /// The state's name.
        name: String,
    },
    /// `change_state` was called from a thread-safe handler.
    #[error("a state cannot be changed from a thread-safe handler")]
    InThreadSafeHandler,
    /// `change_state` was called from an `on_enter` or `on_exit` hook.
    #[error("a state cannot be changed from an on_enter or on_exit hook")]
    SwitchInsideHook,
    /// The default state cannot have substates (it is the same value in every agent).
    #[error("the default state cannot have substates")]
    DefaultStateIsFlat,
    /// The agent was deactivated ([`Context::deactivate_agent`](crate::Context::deactivate_agent)):
    /// it stays in the state awaiting deregistration.
    #[error("the agent is deactivated: it stays in the state awaiting deregistration")]
    AgentDeactivated,
    /// `transfer_to_state` came back to a state it had already passed through for the same
    /// message.
    #[error("transfer_to_state loop for {type_name}: state {state} reached twice")]
    TransferLoop {
        /// The message type.
        type_name: &'static str,
        /// The state reached twice.
        state: String,
    },
}

/// A state of an agent: a cheap handle, compared by identity.
///
/// States are values the agent owns (usually fields created in its constructor). Handlers
/// are subscribed per state; a message is looked up in the current state, then in its
/// parents, then in the dead-letter handlers. Every agent also has a default state
/// ([`Context::default_state`](crate::Context::default_state)) it starts in, and returns to
/// after `on_finish` (running the `on_exit` hooks of the states it leaves, leaf first; not
/// after a panic).
///
/// A whole state machine is the crate's example `connection` (the file
/// `examples/connection.rs` in the source repository; run it with
/// `cargo run --example connection`): a connection that goes `disconnected` →
/// `connecting` → `connected`, where `connecting` has a 50 ms `time_limit` that falls back
/// to `failed` and retries, `connected` has the substates `idle` and `busy` and
/// `on_enter`/`on_exit` hooks, and a heartbeat from `send_periodic` lives only while
/// `connected` (its timer handle is dropped in `on_exit`).
///
/// # Examples
///
/// ```
/// use agentbox::{History, State};
/// let working = State::with_history("working", History::Shallow);
/// let reading = working.initial_substate("reading").unwrap();
/// let writing = working.substate("writing").unwrap();
/// assert!(reading.is_within(&working));
/// assert!(!working.is_within(&writing));
/// assert_eq!(writing.parent(), Some(&working));
/// assert!(working.initial_substate("again").is_err());
/// ```
#[derive(Clone)]
pub struct State(pub(crate) Arc<StateData>);

pub(crate) struct StateData {
    id: u64,
    name: String,
    parent: Option<State>,
    level: usize,
    history: History,
    /// Weak: the parent must not keep its children alive (the agent owns them).
    initial: OnceLock<Weak<StateData>>,
    has_substates: AtomicBool,
}

static NEXT_STATE: AtomicU64 = AtomicU64::new(1);

impl State {
    /// A top-level state without history.
    pub fn new(name: impl Into<String>) -> State {
        Self::make(name.into(), None, History::None)
    }

    /// A top-level state with the given history.
    pub fn with_history(name: impl Into<String>, history: History) -> State {
        Self::make(name.into(), None, history)
    }

    fn make(name: String, parent: Option<State>, history: History) -> State {
        let level = parent.as_ref().map_or(1, |p| p.0.level + 1);
        State(Arc::new(StateData {
            id: NEXT_STATE.fetch_add(1, Ordering::Relaxed),
            name,
            parent,
            level,
            history,
            initial: OnceLock::new(),
            has_substates: AtomicBool::new(false),
        }))
    }

    /// A substate of `self` with the given history.
    ///
    /// # Errors
    ///
    /// [`StateError::TooDeep`] past [`MAX_STATE_NESTING`] levels;
    /// [`StateError::DefaultStateIsFlat`] under the default state.
    pub fn substate_with_history(
        &self,
        name: impl Into<String>,
        history: History,
    ) -> Result<State, StateError> {
        let name = name.into();
        if self == default_state() {
            return Err(StateError::DefaultStateIsFlat);
        }
        if self.0.level >= MAX_STATE_NESTING {
            return Err(StateError::TooDeep { name });
        }
        self.0.has_substates.store(true, Ordering::Relaxed);
        Ok(Self::make(name, Some(self.clone()), history))
    }

    /// A substate of `self` without history.
    ///
    /// # Errors
    ///
    /// [`StateError::TooDeep`] past [`MAX_STATE_NESTING`] levels;
    /// [`StateError::DefaultStateIsFlat`] under the default state.
    pub fn substate(&self, name: impl Into<String>) -> Result<State, StateError> {
        self.substate_with_history(name, History::None)
    }

    /// The initial substate of `self`: entering `self` enters it (unless history says
    /// otherwise).
    ///
    /// # Errors
    ///
    /// [`StateError::InitialAlreadySet`] if `self` has one already, [`StateError::TooDeep`],
    /// [`StateError::DefaultStateIsFlat`] under the default state.
    pub fn initial_substate(&self, name: impl Into<String>) -> Result<State, StateError> {
        self.initial_substate_with_history(name, History::None)
    }

    /// [`initial_substate`](Self::initial_substate) with a history of its own.
    ///
    /// # Errors
    ///
    /// As [`initial_substate`](Self::initial_substate).
    pub fn initial_substate_with_history(
        &self,
        name: impl Into<String>,
        history: History,
    ) -> Result<State, StateError> {
        if self.0.initial.get().is_some() {
            return Err(StateError::InitialAlreadySet {
                parent: self.0.name.clone(),
            });
        }
        let child = self.substate_with_history(name, history)?;
        self.0.initial.set(Arc::downgrade(&child.0)).map_err(|_| {
            StateError::InitialAlreadySet {
                parent: self.0.name.clone(),
            }
        })?;
        Ok(child)
    }

    /// The state's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The parent state, if this is a substate.
    pub fn parent(&self) -> Option<&State> {
        self.0.parent.as_ref()
    }

    /// The history kind.
    pub fn history(&self) -> History {
        self.0.history
    }

    /// Nesting level: 1 for a top-level state.
    pub fn level(&self) -> usize {
        self.0.level
    }

    /// Whether `self` is `other` or one of its (transitive) substates.
    pub fn is_within(&self, other: &State) -> bool {
        let mut s = Some(self);
        while let Some(st) = s {
            if st == other {
                return true;
            }
            s = st.parent();
        }
        false
    }

    pub(crate) fn id(&self) -> u64 {
        self.0.id
    }

    pub(crate) fn has_substates(&self) -> bool {
        self.0.has_substates.load(Ordering::Relaxed)
    }

    pub(crate) fn initial(&self) -> Option<State> {
        self.0.initial.get().and_then(Weak::upgrade).map(State)
    }

    /// The path from the top-level state down to `self`.
    pub(crate) fn path(&self) -> Vec<State> {
        let mut path = Vec::with_capacity(self.0.level);
        let mut s = Some(self);
        while let Some(st) = s {
            path.push(st.clone());
            s = st.parent();
        }
        path.reverse();
        path
    }
}

/// The state of a deactivated agent: no handlers, no hooks (SObjectizer's
/// `awaiting_deregistration_state`).
pub(crate) fn awaiting_deregistration_state() -> &'static State {
    static AWAITING: std::sync::LazyLock<State> =
        std::sync::LazyLock::new(|| State::new("<awaiting deregistration>"));
    &AWAITING
}

/// The default state every agent starts in: one value for all agents (each agent keeps its
/// own handlers, hooks and history for it), so creating an agent allocates no state.
pub(crate) fn default_state() -> &'static State {
    static DEFAULT: std::sync::LazyLock<State> =
        std::sync::LazyLock::new(|| State::new("<default>"));
    &DEFAULT
}

impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}
impl Eq for State {}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "State({})", self.0.name)
    }
}
