//! The agent's message limits, declared in `define` (see [`crate::limits`]).

use super::*;

impl<A: Agent> Context<A> {
    /// Rule 1 of [`crate::limits`]: the agent's limits are fixed from now on.
    pub(crate) fn freeze_limits(&mut self) {
        self.subs.limits_fixed = true;
        let Some(declared) = self.limits.take() else {
            return;
        };
        if let (Some(table), Some(core)) = ((*declared).build(), self.this.upgrade()) {
            let _ = core.limits.set(Box::new(table));
        }
    }

    fn declare_limit(&mut self, ty: Option<MessageType>, spec: Spec) -> Result<(), LimitError> {
        if self.subs.limits_fixed {
            return Err(LimitError::TooLate);
        }
        self.limits.get_or_insert_default().add(ty, spec)
    }

    /// At most `max` demands of `M` may wait for this agent; more are dropped.
    ///
    /// # Errors
    ///
    /// [`LimitError`] (see [`crate::limits`]).
    pub fn limit_then_drop<M: 'static>(&mut self, max: usize) -> Result<(), LimitError> {
        let spec = Spec {
            max,
            overflow: Overflow::Drop,
        };
        self.declare_limit(Some(MessageType::named::<M>()), spec)
    }

    /// At most `max` demands of `M`; one more aborts the process (after a log line).
    ///
    /// # Errors
    ///
    /// [`LimitError`].
    pub fn limit_then_abort<M: 'static>(&mut self, max: usize) -> Result<(), LimitError> {
        let spec = Spec {
            max,
            overflow: Overflow::Abort,
        };
        self.declare_limit(Some(MessageType::named::<M>()), spec)
    }

    /// At most `max` demands of `M`; more go on to `to` (one redirection deeper).
    ///
    /// # Errors
    ///
    /// [`LimitError`].
    pub fn limit_then_redirect<M: 'static>(
        &mut self,
        max: usize,
        to: &Mbox,
    ) -> Result<(), LimitError> {
        let spec = Spec {
            max,
            overflow: Overflow::Redirect(to.clone()),
        };
        self.declare_limit(Some(MessageType::named::<M>()), spec)
    }

    /// At most `max` demands of immutable `M`; for one more, `transform` makes another
    /// message and says where it goes (one redirection deeper).
    ///
    /// # Errors
    ///
    /// [`LimitError`].
    pub fn limit_then_transform<M, F>(&mut self, max: usize, transform: F) -> Result<(), LimitError>
    where
        M: Send + Sync + 'static,
        F: Fn(&M) -> Transformed + Send + Sync + 'static,
    {
        let f: TransformFn = Arc::new(move |m: &Message| m.downcast_ref::<M>().map(&transform));
        let spec = Spec {
            max,
            overflow: Overflow::Transform(f),
        };
        self.declare_limit(Some(MessageType::named::<M>()), spec)
    }

    /// The limit for every subscribed type without its own: each such type gets its own
    /// counter of `max`, and messages over it are dropped.
    ///
    /// # Errors
    ///
    /// [`LimitError`].
    pub fn default_limit_then_drop(&mut self, max: usize) -> Result<(), LimitError> {
        let spec = Spec {
            max,
            overflow: Overflow::Drop,
        };
        self.declare_limit(None, spec)
    }

    /// As [`default_limit_then_drop`](Self::default_limit_then_drop), aborting instead.
    ///
    /// # Errors
    ///
    /// [`LimitError`].
    pub fn default_limit_then_abort(&mut self, max: usize) -> Result<(), LimitError> {
        let spec = Spec {
            max,
            overflow: Overflow::Abort,
        };
        self.declare_limit(None, spec)
    }

    /// As [`default_limit_then_drop`](Self::default_limit_then_drop), redirecting to `to`.
    ///
    /// # Errors
    ///
    /// [`LimitError`].
    pub fn default_limit_then_redirect(&mut self, max: usize, to: &Mbox) -> Result<(), LimitError> {
        let spec = Spec {
            max,
            overflow: Overflow::Redirect(to.clone()),
        };
        self.declare_limit(None, spec)
    }
}
