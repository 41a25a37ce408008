//! What an agent shows of itself to [`Environment::introspect`](crate::Environment::introspect)
//! (feature `monitor`).

use parking_lot::Mutex;

use super::state::State;

/// What an agent's core keeps for introspection: its type name and its current state.
///
/// Cold: read only by [`Environment::introspect`], written at creation and at each state
/// switch.
#[cfg(feature = "monitor")]
pub(crate) struct Shown {
    pub(crate) type_name: fn() -> &'static str,
    /// The current leaf state; `None` until the first switch (the default state, where
    /// every agent starts).
    state: Mutex<Option<State>>,
}

#[cfg(feature = "monitor")]
impl Shown {
    pub(crate) fn new(type_name: fn() -> &'static str) -> Self {
        Shown {
            type_name,
            state: Mutex::new(None),
        }
    }

    /// Publishes the agent's new current leaf state (its worker calls this at a switch).
    pub(crate) fn set_state(&self, state: &State) {
        // The old state is dropped after the lock is released.
        let _old = self.state.lock().replace(state.clone());
    }

    pub(crate) fn state_name(&self) -> String {
        match &*self.state.lock() {
            Some(s) => s.name().to_owned(),
            None => "<default>".to_owned(),
        }
    }
}
