//! A proxy mbox: delegates everything to an inner mbox, so a custom mbox only overrides
//! what it changes.
//!
//! Implement [`ProxyHooks`] (every method has a delegating default) and wrap it with
//! [`ProxyMbox::wrap`].
//!
//! # Examples
//!
//! A proxy that refuses one message type and forwards the rest:
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::{DeliveryMode, Message, RedirectionDepth, SendError};
//! use agentbox_extra::proxy::{ProxyHooks, ProxyMbox};
//!
//! struct NoStrings;
//! impl ProxyHooks for NoStrings {
//!     fn deliver(
//!         &self,
//!         inner: &Mbox,
//!         msg: Message,
//!         depth: RedirectionDepth,
//!         mode: DeliveryMode,
//!     ) -> Result<(), SendError> {
//!         if msg.downcast_ref::<String>().is_some() {
//!             return Err(SendError::Refused {
//!                 type_name: msg.message_type().name(),
//!                 mbox: inner.name(),
//!                 reason: "no strings here".into(),
//!             });
//!         }
//!         inner.deliver_with(msg, depth + 1, mode)
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let mbox = ProxyMbox::wrap(env.create_mbox(), NoStrings);
//!     assert!(send(&mbox, 5u32).is_ok());
//!     assert!(matches!(send(&mbox, String::from("x")), Err(SendError::Refused { .. })));
//! }).unwrap();
//! ```

use std::sync::Arc;

use agentbox::{
    DeliveryFilter, DeliveryMode, Environment, Mbox, MboxId, MboxImpl, MboxKind, Message,
    MessageType, RedirectionDepth, SendError, Sink, SubscribeError,
};

/// The parts of an mbox a proxy may change; each default delegates to the inner mbox.
pub trait ProxyHooks: Send + Sync + 'static {
    /// Delivers a message; the default forwards it with `depth + 1`.
    ///
    /// # Errors
    ///
    /// What the inner mbox (or the override) refuses.
    fn deliver(
        &self,
        inner: &Mbox,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        inner.deliver_with(msg, depth + 1, mode)
    }

    /// Subscribes an agent; the default subscribes it to the inner mbox.
    ///
    /// # Errors
    ///
    /// What the inner mbox (or the override) refuses.
    fn subscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        inner.raw().subscribe(ty, who)
    }

    /// Unsubscribes an agent; the default unsubscribes it from the inner mbox.
    fn unsubscribe(&self, inner: &Mbox, ty: MessageType, who: &Sink) {
        inner.raw().unsubscribe(ty, who)
    }

    /// Sets a delivery filter; the default sets it on the inner mbox.
    ///
    /// # Errors
    ///
    /// What the inner mbox (or the override) refuses.
    fn set_delivery_filter(
        &self,
        inner: &Mbox,
        ty: MessageType,
        filter: DeliveryFilter,
        who: &Sink,
    ) -> Result<(), SubscribeError> {
        inner.raw().set_delivery_filter(ty, filter, who)
    }

    /// Drops a delivery filter; the default drops it on the inner mbox.
    fn drop_delivery_filter(&self, inner: &Mbox, ty: MessageType, who: &Sink) {
        inner.raw().drop_delivery_filter(ty, who)
    }

    /// The proxy's name; the default is `proxy(<inner name>)`.
    fn name(&self, inner: &Mbox) -> String {
        format!("proxy({})", inner.name())
    }
}

/// An mbox that stands in front of `inner` and lets [`ProxyHooks`] change what it wants.
///
/// It has the inner mbox's id and kind: agents subscribed through the proxy find their
/// handlers by the id of the mbox that delivers, which is the inner one.
pub struct ProxyMbox<H> {
    inner: Mbox,
    hooks: H,
}

impl<H> std::fmt::Debug for ProxyMbox<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyMbox")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<H: ProxyHooks> ProxyMbox<H> {
    /// A proxy in front of `inner`, as an [`Mbox`] handle.
    pub fn wrap(inner: Mbox, hooks: H) -> Mbox {
        Mbox::custom(Arc::new(ProxyMbox { inner, hooks }))
    }
}

impl<H: ProxyHooks> MboxImpl for ProxyMbox<H> {
    fn id(&self) -> MboxId {
        self.inner.id()
    }
    fn kind(&self) -> MboxKind {
        self.inner.kind()
    }
    fn subscribe(&self, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
        self.hooks.subscribe(&self.inner, ty, who)
    }
    fn unsubscribe(&self, ty: MessageType, who: &Sink) {
        self.hooks.unsubscribe(&self.inner, ty, who)
    }
    fn deliver(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        self.hooks.deliver(&self.inner, msg, depth, mode)
    }
    fn set_delivery_filter(
        &self,
        ty: MessageType,
        filter: DeliveryFilter,
        who: &Sink,
    ) -> Result<(), SubscribeError> {
        self.hooks.set_delivery_filter(&self.inner, ty, filter, who)
    }
    fn drop_delivery_filter(&self, ty: MessageType, who: &Sink) {
        self.hooks.drop_delivery_filter(&self.inner, ty, who)
    }
    fn name(&self) -> String {
        self.hooks.name(&self.inner)
    }
    fn environment(&self) -> Option<Environment> {
        self.inner.environment()
    }
}
