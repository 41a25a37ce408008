//! The raw subscription operations of an mbox, kept apart from the handle users hold.

use super::seam::{AgentArc, AgentSide, Agents};
use super::SinkRepr;
use super::{DeliveryFilter, Mbox, Repr, Sink, SubscribeError};
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
/// use agentbox::{Mbox, MessageType, Sink, SubscribeError};
///
/// fn pass_on(inner: &Mbox, ty: MessageType, who: &Sink) -> Result<(), SubscribeError> {
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
    pub fn subscribe(&self, ty: MessageType, subscriber: &Sink) -> Result<(), SubscribeError> {
        match &self.0 .0 {
            Repr::Mpmc(m) => m.subscribe(ty, subscriber),
            Repr::Direct(a) => {
                check_owner(self.0, a, subscriber)?;
                Agents::set_subscribed(a, ty.type_id(), true);
                Ok(())
            }
            Repr::Unique(m) => m.subscribe(ty, subscriber),
            Repr::Custom(c) => c.subscribe(ty, subscriber),
        }
    }

    /// Removes `subscriber`'s registration for type `ty` (see [`MboxImpl::unsubscribe`](crate::MboxImpl::unsubscribe)).
    pub fn unsubscribe(&self, ty: MessageType, subscriber: &Sink) {
        match &self.0 .0 {
            Repr::Mpmc(m) => m.unsubscribe(ty, subscriber),
            Repr::Direct(a) => {
                if is_owner(a, subscriber) {
                    Agents::set_subscribed(a, ty.type_id(), false);
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
        subscriber: &Sink,
    ) -> Result<(), SubscribeError> {
        match &self.0 .0 {
            Repr::Mpmc(m) => {
                m.set_filter(ty, Some(filter), subscriber);
                Ok(())
            }
            Repr::Direct(a) => {
                check_owner(self.0, a, subscriber)?;
                Agents::set_filter(a, ty, Some(filter));
                Ok(())
            }
            Repr::Unique(_) => Err(SubscribeError::FiltersUnsupported {
                mbox: self.0.name(),
            }),
            Repr::Custom(c) => c.set_delivery_filter(ty, filter, subscriber),
        }
    }

    /// Removes `subscriber`'s delivery filter for type `ty`, if any.
    pub fn drop_delivery_filter(&self, ty: MessageType, subscriber: &Sink) {
        match &self.0 .0 {
            Repr::Mpmc(m) => m.set_filter(ty, None, subscriber),
            Repr::Direct(a) => {
                if is_owner(a, subscriber) {
                    Agents::set_filter(a, ty, None);
                }
            }
            Repr::Unique(_) => {}
            Repr::Custom(c) => c.drop_delivery_filter(ty, subscriber),
        }
    }
}

/// A direct mbox takes its own agent only (no other agent, no binding).
fn is_owner(owner: &AgentArc, who: &Sink) -> bool {
    matches!(&who.0, SinkRepr::Agent(a) if Agents::is(owner, a))
}

fn check_owner(mbox: &Mbox, owner: &AgentArc, who: &Sink) -> Result<(), SubscribeError> {
    if is_owner(owner, who) {
        Ok(())
    } else {
        Err(SubscribeError::NotOwner { mbox: mbox.name() })
    }
}
