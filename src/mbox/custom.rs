//! The public trait through which custom mboxes join the delivery path.

use crate::environment::handle::Environment;
use crate::mbox::{
    DeliveryFilter, DeliveryMode, MboxId, MboxKind, SendError, Sink, SubscribeError,
};
use crate::message::{Message, MessageType, RedirectionDepth};

/// The contract of a message box, for mboxes written outside this crate.
///
/// This mirrors SObjectizer 5.8's `abstract_message_box_t`. Wrap an implementation with
/// [`Mbox::custom`](crate::Mbox::custom); agents then subscribe to it, filter it and send
/// to it exactly as to a built-in mbox, and bindings bind it to other sinks.
///
/// **Changed (sinks):** subscribers are [`Sink`]s — an agent, another mbox or a
/// [`MessageSink`](crate::MessageSink) — not agents only (`AgentRef` before); hand them
/// messages with [`Sink::push_message`]. [`deliver`](Self::deliver) gets the
/// [`DeliveryMode`] (whether it may block), which used to be implicit, and passes it on.
///
/// # Contract
///
/// 1. **Identity.** [`id`](Self::id) is stable for the mbox's life and unique in the
///    process: allocate it with [`MboxId::next`], or return the id of an mbox you wrap and
///    stand in for.
/// 2. **Subscriptions.** An agent calls [`subscribe`](Self::subscribe) once per message
///    type when its first handler for that type from this mbox appears (whatever the number
///    of states), and [`unsubscribe`](Self::unsubscribe) once when its last one goes,
///    including when the agent finishes; a binding does so when it binds and unbinds.
///    Handlers themselves stay in the agent: the mbox only learns *who* wants a type.
/// 3. **Delivery.** [`deliver`](Self::deliver) hands the message to each subscriber that
///    should get it with [`Sink::push_message`], passing this mbox's `id`, the depth and
///    the mode it was given (agents find their handler by `(mbox id, type)`). It runs on
///    the sender's thread, must not block unless the mode is
///    [`DeliveryMode::Ordinary`] and a sink does, and must not call back into the sender.
///    An [`MboxKind::MultiConsumer`] mbox must refuse [`Mutable`](crate::Mutable) messages
///    with [`SendError::MutableToMultiConsumer`].
/// 4. **Redirection.** An mbox that forwards to another mbox calls
///    [`Mbox::deliver_with`](crate::Mbox::deliver_with) with `depth + 1`; built-in mboxes drop (with
///    [`SendError::RedirectionDepthExceeded`]) a message that arrives with
///    `depth >= MAX_REDIRECTION_DEPTH`, which ends forwarding loops.
/// 5. **Filters.** [`set_delivery_filter`](Self::set_delivery_filter) replaces any filter
///    of that subscriber for that type; only later sends see the change. A filter without
///    a subscription delivers nothing. Agents drop their filters when they finish. An mbox
///    that cannot filter returns [`SubscribeError::FiltersUnsupported`].
/// 6. **Kind.** [`kind`](Self::kind) tells agents whether [`Mutable`](crate::Mutable)
///    messages may be received from it.
///
/// # Examples
///
/// A forwarding mbox that counts what passes through:
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use agentbox::prelude::*;
/// use agentbox::{DeliveryFilter, DeliveryMode, Message, MessageType, MboxId, MboxImpl, MboxKind,
///                RedirectionDepth, SendError, Sink, SubscribeError};
///
/// struct Counting { inner: Mbox, seen: AtomicUsize }
///
/// impl MboxImpl for Counting {
///     fn id(&self) -> MboxId { self.inner.id() }
///     fn kind(&self) -> MboxKind { self.inner.kind() }
///     fn subscribe(&self, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
///         self.inner.raw().subscribe(ty, who)
///     }
///     fn unsubscribe(&self, ty: MessageType, who: &Sink) { self.inner.raw().unsubscribe(ty, who) }
///     fn deliver(&self, msg: Message, depth: RedirectionDepth, mode: DeliveryMode)
///         -> Result<(), SendError> {
///         self.seen.fetch_add(1, Ordering::Relaxed);
///         self.inner.deliver_with(msg, depth + 1, mode)
///     }
///     fn set_delivery_filter(&self, ty: MessageType, f: DeliveryFilter, who: &Sink)
///         -> Result<(), SubscribeError> { self.inner.raw().set_delivery_filter(ty, f, who) }
///     fn drop_delivery_filter(&self, ty: MessageType, who: &Sink) {
///         self.inner.raw().drop_delivery_filter(ty, who)
///     }
///     fn name(&self) -> String { format!("counting({})", self.inner.name()) }
///     fn environment(&self) -> Option<Environment> { self.inner.environment() }
/// }
///
/// Environment::launch(|env| {
///     let counting = Arc::new(Counting { inner: env.create_mbox(), seen: AtomicUsize::new(0) });
///     let mbox = Mbox::custom(counting.clone());
///     send(&mbox, 1u8).unwrap();
///     send(&mbox, 2u8).unwrap();
///     assert_eq!(counting.seen.load(Ordering::Relaxed), 2);
/// }).unwrap();
/// ```
pub trait MboxImpl: Send + Sync + 'static {
    /// The mbox's unique id.
    fn id(&self) -> MboxId;

    /// Multi-consumer or single-consumer.
    fn kind(&self) -> MboxKind;

    /// `subscriber` (an agent, or a sink bound by a binding) wants messages of type `ty`
    /// from this mbox.
    ///
    /// The default refuses every subscription ([`SubscribeError::NotSubscribable`]): for a
    /// mbox that only forwards what it is sent (a remote or send-only mbox).
    ///
    /// # Errors
    ///
    /// Whatever the mbox refuses, e.g. [`SubscribeError::SubscriberTaken`].
    fn subscribe(&self, ty: MessageType, subscriber: &Sink) -> Result<(), SubscribeError> {
        let _ = (ty, subscriber);
        Err(SubscribeError::NotSubscribable { mbox: self.name() })
    }

    /// `subscriber` no longer wants messages of type `ty` (its filter, if any, stays).
    /// The default does nothing (nothing was subscribed).
    fn unsubscribe(&self, ty: MessageType, subscriber: &Sink) {
        let _ = (ty, subscriber);
    }

    /// Delivers one message that has been redirected `depth` times so far, in `mode`.
    ///
    /// # Errors
    ///
    /// [`SendError`] when the message is not accepted at all.
    fn deliver(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError>;

    /// Sets or replaces `subscriber`'s filter for type `ty`. The default refuses
    /// ([`SubscribeError::FiltersUnsupported`]).
    ///
    /// # Errors
    ///
    /// [`SubscribeError::FiltersUnsupported`] when the mbox cannot filter.
    fn set_delivery_filter(
        &self,
        ty: MessageType,
        filter: DeliveryFilter,
        subscriber: &Sink,
    ) -> Result<(), SubscribeError> {
        let _ = (ty, filter, subscriber);
        Err(SubscribeError::FiltersUnsupported { mbox: self.name() })
    }

    /// Removes `subscriber`'s filter for type `ty`, if any. The default does nothing.
    fn drop_delivery_filter(&self, ty: MessageType, subscriber: &Sink) {
        let _ = (ty, subscriber);
    }

    /// A name for diagnostics.
    fn name(&self) -> String;

    /// The environment the mbox belongs to; `None` once that environment is gone.
    fn environment(&self) -> Option<Environment>;
}
