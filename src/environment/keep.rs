//! [`Environment::keep`]: values that live as long as the environment.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::Environment;

impl Environment {
    /// Keeps `value` alive until the environment ends, then drops it: for a guard whose
    /// drop stops something (a [`Harmonizer`](crate::harmonizer::Harmonizer), the page's
    /// `Monitor`, a sink binding) that should live as long as the environment and not just
    /// to the end of the closure given to [`launch`](Self::launch).
    ///
    /// The values are dropped once every coop is gone after a stop (when `launch` is about
    /// to return), last kept first, before the environment's timer thread and default
    /// dispatcher stop. A value kept after that is dropped at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::prelude::*;
    /// use agentbox::dispatcher::thread_pool;
    /// use agentbox::harmonizer::Harmonizer;
    ///
    /// Environment::launch(|env| {
    ///     let pool = thread_pool::Builder::new().thread_limits(1, 2, 4).build().unwrap();
    ///     // Without `keep`, the harmonizer would stop at the end of this closure.
    ///     env.keep(Harmonizer::builder().dispatcher(&pool).build().unwrap());
    ///     env.stop();
    /// })
    /// .unwrap();
    /// ```
    pub fn keep<T: Send + 'static>(&self, value: T) {
        let value: Box<dyn std::any::Any + Send> = Box::new(value);
        let mut st = self.0.state.lock();
        if st.finished {
            drop(st);
            drop(value);
            return;
        }
        st.kept.push(value);
    }
}

/// Drops `values` last first (as locals go out of scope), each with no lock held; a panic
/// in one's `Drop` is logged and the rest are still dropped.
pub(super) fn drop_in_reverse(env: &Environment, mut values: Vec<Box<dyn std::any::Any + Send>>) {
    while let Some(v) = values.pop() {
        if catch_unwind(AssertUnwindSafe(move || drop(v))).is_err() {
            env.log_error("a value given to Environment::keep panicked when dropped");
        }
    }
}
