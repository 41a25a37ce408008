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
