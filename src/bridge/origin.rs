//! The message an endpoint delivers when the receiver wants to know who sent an event.

use std::fmt;
use std::ops::Deref;

use crate::actors::{Event, EventFlags, EventHandle, EventType};
use crate::ActorId;

/// An event that came through an [`Endpoint`](super::Endpoint) with its YDB envelope: who
/// sent it, to which id, with which cookie and flags. Agents subscribe to `FromActor<E>`
/// (for the types exposed with [`event_from_actor`](super::Endpoint::event_from_actor)) like
/// to any message; it dereferences to the event.
///
/// A reply echoes the cookie, as YDB's actors do: [`reply`](Self::reply) builds that
/// handle, to send with [`ActorSystem::send_handle`](crate::actors::ActorSystem::send_handle)
/// or [`Exposed::send_handle`](super::Exposed::send_handle).
///
/// # Examples
///
/// ```
/// use agentbox::actors::*;
/// use agentbox::bridge::FromActor;
/// use agentbox::ActorId;
///
/// struct Ping(u32);
/// impl Event for Ping { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1; }
/// struct Pong(u32);
/// impl Event for Pong { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 2; }
///
/// fn answer(ping: &FromActor<Ping>, me: ActorId) -> EventHandle {
///     ping.reply(me, Pong(ping.0 + 1)) // to ping.sender(), cookie echoed
/// }
/// ```
pub struct FromActor<E> {
    event: E,
    event_type: EventType,
    sender: ActorId,
    recipient: ActorId,
    cookie: u64,
    flags: EventFlags,
}

impl<E: Event> FromActor<E> {
    /// Takes the event out of `h` with its envelope (decoded first if it came from another
    /// node); the handle back if it does not carry an `E`.
    pub(crate) fn take(mut h: EventHandle) -> Result<FromActor<E>, EventHandle> {
        match h.take::<E>() {
            Some(event) => Ok(FromActor {
                event,
                event_type: h.event_type(),
                sender: h.sender(),
                recipient: h.recipient(),
                cookie: h.cookie(),
                flags: h.flags(),
            }),
            None => Err(h),
        }
    }
}

impl<E> FromActor<E> {
    /// The event.
    pub fn event(&self) -> &E {
        &self.event
    }

    /// The event, by value.
    pub fn into_event(self) -> E {
        self.event
    }

    /// Who sent it (the empty id when the sender was no actor and gave none).
    pub fn sender(&self) -> ActorId {
        self.sender
    }

    /// The id it was sent to, as addressed (a service id stays a service id).
    pub fn recipient(&self) -> ActorId {
        self.recipient
    }

    /// The sender's cookie, to echo in a reply.
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// The flags it was sent with (its channel among them).
    pub fn flags(&self) -> EventFlags {
        self.flags
    }

    /// The YDB event type it arrived as.
    pub fn event_type(&self) -> EventType {
        self.event_type
    }

    /// A reply to the sender from `from` (usually the receiver's own
    /// [`Exposed::id`](super::Exposed::id)), echoing the cookie.
    pub fn reply<R: Event>(&self, from: ActorId, event: R) -> EventHandle {
        EventHandle::new(self.sender, from, event).with_cookie(self.cookie)
    }
}

impl<E> Deref for FromActor<E> {
    type Target = E;

    fn deref(&self) -> &E {
        &self.event
    }
}

impl<E: fmt::Debug> fmt::Debug for FromActor<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FromActor")
            .field("event", &self.event)
            .field("sender", &self.sender)
            .field("recipient", &self.recipient)
            .field("cookie", &self.cookie)
            .finish()
    }
}
