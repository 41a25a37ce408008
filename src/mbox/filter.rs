//! Delivery filters: per (mbox, message type, subscriber) predicates run by the sender.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use crate::exception;
use crate::message::{Access, Message};

/// A predicate that decides, on the sender's thread and before anything is queued, whether
/// one subscriber gets one message.
///
/// Agents set filters through [`Context::set_delivery_filter`](crate::Context::set_delivery_filter);
/// custom mboxes receive them in
/// [`MboxImpl::set_delivery_filter`](crate::MboxImpl::set_delivery_filter) and evaluate
/// them with [`accepts`](Self::accepts).
///
/// # What a filter may do
///
/// A filter runs on the sender's thread, once per subscriber and send, with no lock of
/// the built-in mboxes held: it may send, register a coop, subscribe an agent to the mbox
/// it filters, or change filters. A subscriber added during a send gets the sends that
/// begin after its subscription (the send in progress keeps the subscribers it began
/// with). Keep it short: the sender waits for it.
///
/// # A filter that panics
///
/// A panic in a filter counts as a refusal: that subscriber does not get the message, every
/// other subscriber of the same send still does, and `send` returns as if nothing happened.
/// The panic goes to the exception reaction of the agent that set the filter (through
/// [`Context::set_delivery_filter`](crate::Context::set_delivery_filter)), as a panic in one
/// of its handlers would, and is logged through the environment's error logger: with the
/// default reaction, [`Abort`](crate::ExceptionReaction::Abort), the process ends, as in
/// SObjectizer. A filter built with [`new`](Self::new) and never given to an agent logs the
/// panic to stderr.
///
/// # Examples
///
/// ```
/// use agentbox::{DeliveryFilter, Message};
/// let even = DeliveryFilter::new(|n: &u32| n % 2 == 0);
/// assert!(even.accepts(&Message::new(4u32)));
/// assert!(!even.accepts(&Message::new(5u32)));
/// assert!(!even.accepts(&Message::new("not a u32")));
/// ```
#[derive(Clone)]
pub struct DeliveryFilter(Arc<Inner>);

struct Inner {
    predicate: Box<dyn Fn(&Message) -> bool + Send + Sync>,
    /// Where a panic goes: the owning agent's exception reaction (set by the agent layer,
    /// given the panic's message).
    owner: OnceLock<Box<dyn Fn(String) + Send + Sync>>,
    /// A serializable form of the predicate, for mboxes that can run it elsewhere (the
    /// cluster mbox's shippable filters, `crate::bridge`).
    shipped: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl DeliveryFilter {
    /// A filter over messages of type `M`; messages of any other type are rejected.
    pub fn new<M, F>(predicate: F) -> Self
    where
        M: 'static,
        F: Fn(&M) -> bool + Send + Sync + 'static,
    {
        DeliveryFilter(Arc::new(Inner {
            predicate: Box::new(move |msg: &Message| {
                msg.downcast_ref::<M>().is_some_and(&predicate)
            }),
            owner: OnceLock::new(),
            shipped: None,
        }))
    }

    /// A filter over `M` that also carries `shipped`, a serializable form of the same
    /// predicate that an mbox may evaluate on another node.
    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    pub(crate) fn with_shipped<M, F>(
        predicate: F,
        shipped: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Self
    where
        M: 'static,
        F: Fn(&M) -> bool + Send + Sync + 'static,
    {
        DeliveryFilter(Arc::new(Inner {
            predicate: Box::new(move |msg: &Message| {
                msg.downcast_ref::<M>().is_some_and(&predicate)
            }),
            owner: OnceLock::new(),
            shipped: Some(shipped),
        }))
    }

    /// The serializable form of the predicate, if it has one.
    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    pub(crate) fn shipped(&self) -> Option<&Arc<dyn std::any::Any + Send + Sync>> {
        self.0.shipped.as_ref()
    }

    /// The same filter, owned by an agent: its panics go to `on_panic` (that agent's
    /// exception reaction), given the panic's message.
    pub(crate) fn owned_by(self, on_panic: Box<dyn Fn(String) + Send + Sync>) -> Self {
        let _ = self.0.owner.set(on_panic);
        self
    }

    /// Whether the message passes the filter. An enveloped message is first revealed for
    /// [`Access::Inspection`]; one its envelope hides is rejected. A panic in the predicate
    /// is a rejection (see the type's docs).
    #[inline]
    pub fn accepts(&self, msg: &Message) -> bool {
        let Some(m) = msg.reveal(Access::Inspection) else {
            return false;
        };
        match catch_unwind(AssertUnwindSafe(|| (self.0.predicate)(m))) {
            Ok(pass) => pass,
            Err(payload) => {
                self.panicked(&payload);
                false
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn panicked(&self, payload: &Box<dyn std::any::Any + Send>) {
        let message = exception::panic_message(payload);
        match self.0.owner.get() {
            Some(owner) => owner(message),
            None => eprintln!("agentbox: a delivery filter failed: panic: {message}"),
        }
    }
}

impl fmt::Debug for DeliveryFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeliveryFilter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Envelope;

    struct Hidden;
    impl Envelope for Hidden {
        fn reveal(&self, access: Access) -> bool {
            access != Access::Inspection
        }
    }

    struct Open;
    impl Envelope for Open {
        fn reveal(&self, _: Access) -> bool {
            true
        }
    }

    #[test]
    fn a_filter_sees_through_an_open_envelope_and_rejects_a_hidden_payload() {
        let any = DeliveryFilter::new(|_: &u32| true);
        assert!(any.accepts(&Message::enveloped(Message::new(1u32), Open)));
        assert!(!any.accepts(&Message::enveloped(Message::new(1u32), Hidden)));
        let nested = Message::enveloped(Message::enveloped(Message::new(1u32), Hidden), Open);
        assert!(!any.accepts(&nested));
    }
}
