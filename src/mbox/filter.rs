//! Delivery filters: per (mbox, message type, subscriber) predicates run by the sender.

use std::fmt;
use std::sync::Arc;

use crate::message::{Access, Message};

/// A predicate that decides, on the sender's thread and before anything is queued, whether
/// one subscriber gets one message.
///
/// Agents set filters through [`Context::set_delivery_filter`](crate::Context::set_delivery_filter);
/// custom mboxes receive them in
/// [`MboxImpl::set_delivery_filter`](crate::MboxImpl::set_delivery_filter) and evaluate
/// them with [`accepts`](Self::accepts).
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
pub struct DeliveryFilter(Arc<dyn Fn(&Message) -> bool + Send + Sync>);

impl DeliveryFilter {
    /// A filter over messages of type `M`; messages of any other type are rejected.
    pub fn new<M, F>(predicate: F) -> Self
    where
        M: 'static,
        F: Fn(&M) -> bool + Send + Sync + 'static,
    {
        DeliveryFilter(Arc::new(move |msg: &Message| {
            msg.downcast_ref::<M>().is_some_and(&predicate)
        }))
    }

    /// Whether the message passes the filter. An enveloped message is first revealed for
    /// [`Access::Inspection`]; one its envelope hides is rejected.
    #[inline]
    pub fn accepts(&self, msg: &Message) -> bool {
        msg.reveal(Access::Inspection).is_some_and(|m| (self.0)(m))
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
