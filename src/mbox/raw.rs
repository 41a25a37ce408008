//! The raw subscription operations of an mbox, kept apart from the handle users hold.

use std::sync::Arc;

use super::{DeliveryFilter, Mbox, Repr, SubscribeError};
use crate::agent::{AgentArc, AgentRef};
use crate::message::MessageType;

/// The raw subscription operations of an mbox: what an agent's [`Context`] does when it
/// subscribes, and what a custom mbox ([`MboxImpl`]) that wraps another mbox passes on.
///
/// Agents never need this: [`Context::subscribe`] and [`Context::set_delivery_filter`]
/// record what they register and remove it when the agent finishes. A registration made
/// here is the caller's to undo: a custom mbox passes each `unsubscribe` it gets on to the
/// mbox it wraps (as `lock_api` keeps a lock's raw operations apart from the guard-based
/// API, and leaves pairing them to the implementor).
///
/// # Examples
///
/// A custom mbox that wraps another one passes subscriptions through:
///
/// ```
/// use agentbox::{AgentRef, Mbox, MessageType, SubscribeError};
///
/// fn pass_on(inner: &Mbox, ty: MessageType, who: &AgentRef) -> Result<(), SubscribeError> {
///     inner.raw().subscribe(ty, who)
/// }
/// ```
///
/// [`Context`]: crate::Context
/// [`Context::subscribe`]: crate::Context::subscribe
/// [`Context::set_delivery_filter`]: crate::Context::set_delivery_filter
/// [`MboxImpl`]: crate::MboxImpl
#[derive(Clone, Copy, Debug)]
pub struct RawMbox<'a>(pub(super) &'a Mbox);

impl RawMbox<'_> {
    /// Registers `subscriber` for messages of type `ty` (see [`MboxImpl::subscribe`](crate::MboxImpl::subscribe)).
    ///
    /// Agents do this through [`Context::subscribe`](crate::Context::subscribe).
    ///
    /// # Errors
    ///
    /// See [`SubscribeError`].
    pub fn subscribe(&self, ty: MessageType, subscriber: &AgentRef) -> Result<(), SubscribeError> {
        match &self.0 .0 {
            Repr::Mpmc(m) => m.subscribe(ty, subscriber),
            Repr::Direct(a) => {
                check_owner(self.0, a, subscriber)?;
                a.direct_set_subscribed(ty, true);
                Ok(())
            }
            Repr::Unique(m) => m.subscribe(ty, subscriber),
            Repr::Custom(c) => c.subscribe(ty, subscriber),
        }
    }

    /// Removes `subscriber`'s registration for type `ty` (see [`MboxImpl::unsubscribe`](crate::MboxImpl::unsubscribe)).
    pub fn unsubscribe(&self, ty: MessageType, subscriber: &AgentRef) {
        match &self.0 .0 {
            Repr::Mpmc(m) => m.unsubscribe(ty, subscriber),
            Repr::Direct(a) => {
                if Arc::ptr_eq(a, &subscriber.0) {
                    a.direct_set_subscribed(ty, false);
                }
            }
            Repr::Unique(m) => m.unsubscribe(ty, subscriber),
            Repr::Custom(c) => c.unsubscribe(ty, subscriber),
        }
    }

    /// Sets or replaces `subscriber`'s delivery filter for type `ty`.
    ///
    /// # Errors
    ///
    /// [`SubscribeError::FiltersUnsupported`] for mboxes that cannot filter,
    /// [`SubscribeError::NotOwner`] for another agent's direct mbox.
    pub fn set_delivery_filter(
        &self,
        ty: MessageType,
        filter: DeliveryFilter,
        subscriber: &AgentRef,
    ) -> Result<(), SubscribeError> {
        match &self.0 .0 {
            Repr::Mpmc(m) => {
                m.set_filter(ty, Some(filter), subscriber);
                Ok(())
            }
            Repr::Direct(a) => {
                check_owner(self.0, a, subscriber)?;
                a.direct_set_filter(ty, Some(filter));
                Ok(())
            }
            Repr::Unique(_) => Err(SubscribeError::FiltersUnsupported {
                mbox: self.0.name(),
            }),
            Repr::Custom(c) => c.set_delivery_filter(ty, filter, subscriber),
        }
    }

    /// Removes `subscriber`'s delivery filter for type `ty`, if any.
    pub fn drop_delivery_filter(&self, ty: MessageType, subscriber: &AgentRef) {
        match &self.0 .0 {
            Repr::Mpmc(m) => m.set_filter(ty, None, subscriber),
            Repr::Direct(a) => {
                if Arc::ptr_eq(a, &subscriber.0) {
                    a.direct_set_filter(ty, None);
                }
            }
            Repr::Unique(_) => {}
            Repr::Custom(c) => c.drop_delivery_filter(ty, subscriber),
        }
    }
}

fn check_owner(mbox: &Mbox, owner: &AgentArc, who: &AgentRef) -> Result<(), SubscribeError> {
    if Arc::ptr_eq(owner, &who.0) {
        Ok(())
    } else {
        Err(SubscribeError::NotOwner { mbox: mbox.name() })
    }
}
