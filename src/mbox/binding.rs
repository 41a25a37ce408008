//! Sink bindings (SObjectizer 5.8's `single_sink_binding_t` and `multi_sink_binding_t`):
//! subscriptions of sinks that are not agents, owned by a value that unbinds on drop.
//!
//! Rules a user relies on:
//!
//! 1. A binding is a subscription of the sink at the source mbox, with the mbox's rules
//!    (a direct mbox takes none; a multi-consumer mbox no mutable messages; a mutable
//!    message is never bound to a multi-consumer sink mbox).
//! 2. A message reaches a sink mbox one redirection deeper; a loop of bindings ends at
//!    [`MAX_REDIRECTION_DEPTH`](crate::MAX_REDIRECTION_DEPTH) (counted in
//!    [`DropCounts::redirection_depth`](crate::DropCounts)). The depth bounds the length
//!    of a chain, not its fan-out: a loop that also fans out multiplies the deliveries by
//!    its fan-out at every hop, so do not build one.
//! 3. Registrations are not counted per binding: two bindings of the same (mbox, type,
//!    sink) share one registration, and the first to unbind removes it.
//! 4. A sink mbox that blocks (a full mchain with a `wait_on_full` timeout, in
//!    [`DeliveryMode::Ordinary`](crate::DeliveryMode)) blocks the sender. The built-in
//!    mboxes hold no lock while they deliver, so a binding may be dropped (or made) at
//!    that time, from any thread; the blocked send still delivers to the sinks it started
//!    with.

use parking_lot::Mutex;

use super::{DeliveryFilter, Mbox, Sink, SubscribeError};
use crate::message::MessageType;

/// One binding at a time: messages of one type from one mbox go to one sink, optionally
/// through a delivery filter. Binding again replaces the previous binding (the new one is
/// made first); dropping the value unbinds.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// use agentbox::{SingleSinkBinding, Sink};
///
/// Environment::launch(|env| {
///     let (from, to) = (env.create_mbox(), env.create_mbox());
///     let chain = env.create_mchain(agentbox::mchain::MChainParams::unbounded());
///     // from -> to -> chain, odd numbers only at the first hop.
///     let mut hop1 = SingleSinkBinding::new();
///     hop1.bind_with_filter(&from, Sink::from(to.clone()), |n: &u32| n % 2 == 1).unwrap();
///     let mut hop2 = SingleSinkBinding::new();
///     hop2.bind::<u32>(&to, Sink::from(chain.as_mbox())).unwrap();
///     for n in 0..4u32 {
///         send(&from, n).unwrap();
///     }
///     assert_eq!(chain.len(), 2);
/// }).unwrap();
/// ```
#[must_use = "dropping the binding removes it: keep it, or give it to the environment with `env.keep(binding)`"]
#[derive(Debug, Default)]
pub struct SingleSinkBinding {
    bound: Option<Bound>,
}

#[derive(Debug)]
struct Bound {
    from: Mbox,
    ty: MessageType,
    to: Sink,
    filtered: bool,
}

impl Bound {
    fn make(
        from: &Mbox,
        ty: MessageType,
        to: Sink,
        filter: Option<DeliveryFilter>,
    ) -> Result<Bound, SubscribeError> {
        if let super::sink::SinkRepr::Mbox(m) = &to.0 {
            if ty.is_mutable() && m.kind() == super::MboxKind::MultiConsumer {
                return Err(SubscribeError::MutableFromMultiConsumer {
                    type_name: ty.name(),
                    mbox: m.name(),
                });
            }
        }
        let raw = from.raw();
        let filtered = filter.is_some();
        if let Some(f) = filter {
            raw.set_delivery_filter(ty, f, &to)?;
        }
        if let Err(e) = raw.subscribe(ty, &to) {
            if filtered {
                raw.drop_delivery_filter(ty, &to);
            }
            return Err(e);
        }
        Ok(Bound {
            from: from.clone(),
            ty,
            to,
            filtered,
        })
    }

    fn unbind(self) {
        let raw = self.from.raw();
        raw.unsubscribe(self.ty, &self.to);
        if self.filtered {
            raw.drop_delivery_filter(self.ty, &self.to);
        }
    }
}

impl SingleSinkBinding {
    /// An empty binding.
    pub fn new() -> Self {
        SingleSinkBinding::default()
    }

    /// Binds immutable messages of type `M` from `from` to `to`.
    ///
    /// # Errors
    ///
    /// What `from` refuses ([`SubscribeError`]): e.g. a direct mbox takes no binding
    /// ([`SubscribeError::NotOwner`]). The previous binding, if any, stays then.
    pub fn bind<M: Send + Sync + 'static>(
        &mut self,
        from: &Mbox,
        to: Sink,
    ) -> Result<(), SubscribeError> {
        self.replace(Bound::make(from, MessageType::of::<M>(), to, None)?);
        Ok(())
    }

    /// Binds [`Mutable`](crate::Mutable) messages of type `M` (from a single-consumer mbox).
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind); [`SubscribeError::MutableFromMultiConsumer`] for a
    /// multi-consumer `from`.
    pub fn bind_mutable<M: Send + 'static>(
        &mut self,
        from: &Mbox,
        to: Sink,
    ) -> Result<(), SubscribeError> {
        self.replace(Bound::make(from, MessageType::of_mutable::<M>(), to, None)?);
        Ok(())
    }

    /// Binds messages of type `M` that pass `filter` (run on the sender's thread).
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind); [`SubscribeError::FiltersUnsupported`] for an mbox that
    /// cannot filter.
    pub fn bind_with_filter<M, F>(
        &mut self,
        from: &Mbox,
        to: Sink,
        filter: F,
    ) -> Result<(), SubscribeError>
    where
        M: Send + Sync + 'static,
        F: Fn(&M) -> bool + Send + Sync + 'static,
    {
        let f = DeliveryFilter::new(filter);
        self.replace(Bound::make(from, MessageType::of::<M>(), to, Some(f))?);
        Ok(())
    }

    /// Whether a binding is in place.
    pub fn has_binding(&self) -> bool {
        self.bound.is_some()
    }

    /// Removes the binding, if any.
    pub fn unbind(&mut self) {
        if let Some(b) = self.bound.take() {
            b.unbind();
        }
    }

    fn replace(&mut self, new: Bound) {
        let same = self
            .bound
            .as_ref()
            .is_some_and(|old| old.from == new.from && old.ty == new.ty && old.to == new.to);
        let new_filtered = new.filtered;
        match self.bound.replace(new) {
            // Another binding: the old one goes (after the new one was made).
            Some(old) if !same => old.unbind(),
            // The same (mbox, type, sink): one registration, now the new one's; only a
            // filter the new binding does not have must go.
            Some(old) if old.filtered && !new_filtered => {
                old.from.raw().drop_delivery_filter(old.ty, &old.to);
            }
            _ => {}
        }
    }
}

impl Drop for SingleSinkBinding {
    fn drop(&mut self) {
        self.unbind();
    }
}

/// Many bindings: each (mbox, message type, sink) at most once; dropping the value
/// unbinds them all.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// use agentbox::{MultiSinkBinding, Sink};
///
/// Environment::launch(|env| {
///     let (a, b) = (env.create_mbox(), env.create_mbox());
///     let chain = env.create_mchain(agentbox::mchain::MChainParams::unbounded());
///     let bindings = MultiSinkBinding::new();
///     bindings.bind::<u32>(&a, Sink::from(chain.as_mbox())).unwrap();
///     bindings.bind::<u32>(&b, Sink::from(chain.as_mbox())).unwrap();
///     send(&a, 1u32).unwrap();
///     send(&b, 2u32).unwrap();
///     assert_eq!(chain.len(), 2);
///     bindings.unbind::<u32>(&a, &Sink::from(chain.as_mbox()));
///     send(&a, 3u32).unwrap();
///     assert_eq!(chain.len(), 2);
/// }).unwrap();
/// ```
#[must_use = "dropping the binding removes its bindings: keep it, or give it to the environment with `env.keep(binding)`"]
#[derive(Debug, Default)]
pub struct MultiSinkBinding {
    bound: Mutex<Vec<Bound>>,
}

impl MultiSinkBinding {
    /// No bindings yet.
    pub fn new() -> Self {
        MultiSinkBinding::default()
    }

    /// Binds immutable messages of type `M` from `from` to `to`.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::Duplicate`] if that binding exists; otherwise what `from` refuses.
    pub fn bind<M: Send + Sync + 'static>(
        &self,
        from: &Mbox,
        to: Sink,
    ) -> Result<(), SubscribeError> {
        self.add(from, MessageType::of::<M>(), to, None)
    }

    /// Binds [`Mutable`](crate::Mutable) messages of type `M`.
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind).
    pub fn bind_mutable<M: Send + 'static>(
        &self,
        from: &Mbox,
        to: Sink,
    ) -> Result<(), SubscribeError> {
        self.add(from, MessageType::of_mutable::<M>(), to, None)
    }

    /// Binds messages of type `M` that pass `filter`.
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind); [`SubscribeError::FiltersUnsupported`].
    pub fn bind_with_filter<M, F>(
        &self,
        from: &Mbox,
        to: Sink,
        filter: F,
    ) -> Result<(), SubscribeError>
    where
        M: Send + Sync + 'static,
        F: Fn(&M) -> bool + Send + Sync + 'static,
    {
        self.add(
            from,
            MessageType::of::<M>(),
            to,
            Some(DeliveryFilter::new(filter)),
        )
    }

    fn add(
        &self,
        from: &Mbox,
        ty: MessageType,
        to: Sink,
        filter: Option<DeliveryFilter>,
    ) -> Result<(), SubscribeError> {
        let mut bound = self.bound.lock();
        if bound
            .iter()
            .any(|b| b.from == *from && b.ty == ty && b.to == to)
        {
            return Err(SubscribeError::Duplicate {
                type_name: ty.name(),
                mbox: from.name(),
                state: "<binding>".to_owned(),
            });
        }
        bound.push(Bound::make(from, ty, to, filter)?);
        Ok(())
    }

    /// Removes the binding of `M` from `from` to `to`, if there is one.
    pub fn unbind<M: Send + Sync + 'static>(&self, from: &Mbox, to: &Sink) {
        self.remove(from, MessageType::of::<M>(), to);
    }

    fn remove(&self, from: &Mbox, ty: MessageType, to: &Sink) {
        let mut bound = self.bound.lock();
        if let Some(i) = bound
            .iter()
            .position(|b| b.from == *from && b.ty == ty && b.to == *to)
        {
            bound.swap_remove(i).unbind();
        }
    }

    /// Removes the binding of [`Mutable`](crate::Mutable) messages of type `M` from `from`
    /// to `to`, if there is one.
    pub fn unbind_mutable<M: 'static>(&self, from: &Mbox, to: &Sink) {
        self.remove(from, MessageType::of_mutable::<M>(), to);
    }

    /// Removes every binding.
    pub fn unbind_all(&self) {
        let all = std::mem::take(&mut *self.bound.lock());
        for b in all {
            b.unbind();
        }
    }
}

impl Drop for MultiSinkBinding {
    fn drop(&mut self) {
        self.unbind_all();
    }
}
