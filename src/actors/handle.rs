//! [`EventHandle`]: one event in flight with its envelope of YDB fields.

use std::any::Any;
use std::fmt;

use super::event::{Event, EventType};
use super::flags::EventFlags;
use super::id::ActorId;

/// A serialized event (the interconnect's form), boxed as the payload like a local event.
struct Serialized(Vec<u8>);

/// One event with everything YDB's `IEventHandle` carries: type, flags (with the channel),
/// recipient, sender, cookie, the forward target on non-delivery, and the event itself.
///
/// | field | accessor | set by |
/// |---|---|---|
/// | event type (`u32`) | [`event_type`](Self::event_type) | the event's [`Event::EVENT_TYPE`] |
/// | flags and channel | [`flags`](Self::flags) | [`with_flags`](Self::with_flags) |
/// | recipient as addressed (maybe a service id) | [`recipient`](Self::recipient) | [`new`](Self::new) |
/// | the actor the recipient resolved to | [`recipient_rewrite`](Self::recipient_rewrite) | the routing |
/// | sender | [`sender`](Self::sender) | [`new`](Self::new) |
/// | cookie (opaque; replies echo it) | [`cookie`](Self::cookie) | [`with_cookie`](Self::with_cookie) |
/// | forward target on non-delivery | [`forward_target`](Self::forward_target) | [`forward_on_nondelivery`](Self::forward_on_nondelivery) |
///
/// A state function receives the handle by value. It reads the fields, borrows the event
/// with [`get`](Self::get), takes it with [`take`](Self::take) or
/// [`into_event`](Self::into_event), forwards the whole handle with
/// [`ActorContext::forward`](super::ActorContext::forward) (sender and cookie kept), or
/// gives it back with [`unhandled`](Self::unhandled).
///
/// # Examples
///
/// ```
/// use agentbox::actors::{event_space_begin, Event, EventFlags, EventHandle, ES_USERSPACE};
/// use agentbox::ActorId;
///
/// struct Ping(u32);
/// impl Event for Ping {
///     const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1;
/// }
///
/// let (a, b) = (ActorId::new(1, 10, 0), ActorId::new(1, 11, 1));
/// let mut ev = EventHandle::new(b, a, Ping(7))
///     .with_flags(EventFlags::TRACK_DELIVERY.with_channel(2))
///     .with_cookie(42);
/// assert_eq!((ev.event_type(), ev.recipient(), ev.sender(), ev.cookie()), (Ping::EVENT_TYPE, b, a, 42));
/// assert_eq!(ev.flags().channel(), 2);
/// assert_eq!(ev.get::<Ping>().map(|p| p.0), Some(7));
/// assert_eq!(ev.take::<Ping>().map(|p| p.0), Some(7));
/// assert!(ev.get::<Ping>().is_none()); // taken
/// ```
pub struct EventHandle {
    event_type: EventType,
    flags: EventFlags,
    recipient: ActorId,
    rewrite: ActorId,
    sender: ActorId,
    cookie: u64,
    /// Boxed, as YDB's `OnNondeliveryHolder`: rare, and the handle is moved often.
    forward_target: Option<Box<ActorId>>,
    /// The local event, or a [`Serialized`]; `None` once taken.
    payload: Option<Box<dyn Any + Send>>,
}

// Kept small: a handle is moved several times per hop.
const _: () = assert!(std::mem::size_of::<EventHandle>() <= 88);

impl EventHandle {
    /// A handle carrying `event` from `sender` to `recipient`, no flags, cookie 0.
    pub fn new<E: Event>(recipient: ActorId, sender: ActorId, event: E) -> EventHandle {
        EventHandle {
            event_type: E::EVENT_TYPE,
            flags: EventFlags::empty(),
            recipient,
            rewrite: recipient,
            sender,
            cookie: 0,
            forward_target: None,
            payload: Some(Box::new(event)),
        }
    }

    /// A handle carrying a serialized event of type `event_type` (the interconnect's form:
    /// the receiver decodes the bytes by the type).
    pub fn serialized(
        event_type: EventType,
        recipient: ActorId,
        sender: ActorId,
        bytes: Vec<u8>,
    ) -> EventHandle {
        EventHandle {
            event_type,
            flags: EventFlags::empty(),
            recipient,
            rewrite: recipient,
            sender,
            cookie: 0,
            forward_target: None,
            payload: Some(Box::new(Serialized(bytes))),
        }
    }

    /// This handle with the flags word `flags` (flags and channel).
    #[inline]
    pub fn with_flags(mut self, flags: EventFlags) -> EventHandle {
        self.flags = flags;
        self
    }

    /// This handle with cookie `cookie`.
    #[inline]
    pub fn with_cookie(mut self, cookie: u64) -> EventHandle {
        self.cookie = cookie;
        self
    }

    /// This handle going to `target` if it cannot be delivered: sets
    /// [`FORWARD_ON_NONDELIVERY`](EventFlags::FORWARD_ON_NONDELIVERY) and the target (YDB's
    /// `forwardOnNondelivery`; local targets only).
    pub fn forward_on_nondelivery(mut self, target: ActorId) -> EventHandle {
        self.flags |= EventFlags::FORWARD_ON_NONDELIVERY;
        self.forward_target = Some(Box::new(target));
        self
    }

    /// The event type.
    #[inline]
    pub fn event_type(&self) -> EventType {
        self.event_type
    }

    /// The flags word (flags and channel).
    #[inline]
    pub fn flags(&self) -> EventFlags {
        self.flags
    }

    /// The recipient as the sender addressed it (a service id stays a service id).
    #[inline]
    pub fn recipient(&self) -> ActorId {
        self.recipient
    }

    /// The actor the recipient resolved to: the registered actor of a service id, else the
    /// recipient itself (YDB's `GetRecipientRewrite`).
    #[inline]
    pub fn recipient_rewrite(&self) -> ActorId {
        self.rewrite
    }

    /// The sender ([`ActorId::EMPTY`] for sends from outside any actor, unless given).
    #[inline]
    pub fn sender(&self) -> ActorId {
        self.sender
    }

    /// The cookie: opaque to the system; a reply echoes it.
    #[inline]
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// Where the event goes if it cannot be delivered and
    /// [`FORWARD_ON_NONDELIVERY`](EventFlags::FORWARD_ON_NONDELIVERY) is set; empty if none.
    pub fn forward_target(&self) -> ActorId {
        self.forward_target.as_deref().copied().unwrap_or_default()
    }

    /// Whether the handle carries a local event of type `E` (not taken).
    pub fn is<E: Event>(&self) -> bool {
        self.get::<E>().is_some()
    }

    /// The local event, if it is an `E` and has not been taken.
    pub fn get<E: Event>(&self) -> Option<&E> {
        match &self.payload {
            Some(b) if self.event_type == E::EVENT_TYPE => b.downcast_ref::<E>(),
            _ => None,
        }
    }

    /// The local event, mutably, if it is an `E` and has not been taken.
    pub fn get_mut<E: Event>(&mut self) -> Option<&mut E> {
        match &mut self.payload {
            Some(b) if self.event_type == E::EVENT_TYPE => b.downcast_mut::<E>(),
            _ => None,
        }
    }

    /// Takes the local event out if it is an `E`; the handle keeps its fields.
    pub fn take<E: Event>(&mut self) -> Option<E> {
        self.get::<E>()?;
        self.payload.take()?.downcast::<E>().ok().map(|b| *b)
    }

    /// The local event by value if it is an `E`; otherwise the handle back.
    ///
    /// # Errors
    ///
    /// The handle itself when it does not carry a local `E`.
    pub fn into_event<E: Event>(mut self) -> Result<E, EventHandle> {
        match self.take::<E>() {
            Some(e) => Ok(e),
            None => Err(self),
        }
    }

    /// The bytes of a serialized event.
    pub fn serialized_bytes(&self) -> Option<&[u8]> {
        match &self.payload {
            Some(b) => b.downcast_ref::<Serialized>().map(|s| s.0.as_slice()),
            _ => None,
        }
    }

    /// Whether the event is serialized bytes rather than a local value.
    pub fn is_serialized(&self) -> bool {
        self.serialized_bytes().is_some()
    }

    /// Gives the handle back from a state function: "I do not handle this". A
    /// [`Poison`](super::Poison) given back passes the actor away; any other event becomes a
    /// dead letter with reason [`Unhandled`](super::DeadLetterReason::Unhandled).
    #[inline]
    pub fn unhandled(self) -> Handled {
        Handled::No(self)
    }

    /// Readdresses the handle (forward), keeping sender, cookie and flags.
    pub(crate) fn readdress(&mut self, recipient: ActorId) {
        self.recipient = recipient;
        self.rewrite = recipient;
    }

    #[inline]
    pub(crate) fn set_rewrite(&mut self, rewrite: ActorId) {
        self.rewrite = rewrite;
    }

    /// YDB's `ForwardOnNondelivery`: the same event to the forward target, with
    /// `FORWARD_ON_NONDELIVERY` and `SUBSCRIBE_ON_SESSION` cleared; the old recipient is
    /// kept as the (now unused) forward target.
    pub(crate) fn into_forwarded(mut self) -> EventHandle {
        let target = self.forward_target();
        self.forward_target = Some(Box::new(self.recipient));
        self.flags = self
            .flags
            .without(EventFlags::FORWARD_ON_NONDELIVERY | EventFlags::SUBSCRIBE_ON_SESSION);
        self.readdress(target);
        self
    }
}

impl fmt::Debug for EventHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventHandle")
            .field("event_type", &format_args!("{:#x}", self.event_type))
            .field("flags", &self.flags)
            .field("recipient", &self.recipient)
            .field("sender", &self.sender)
            .field("cookie", &self.cookie)
            .finish_non_exhaustive()
    }
}

/// What a state function did with an event.
#[derive(Debug)]
#[must_use = "return it from the state function"]
pub enum Handled {
    /// The event was handled.
    Yes,
    /// The event was not handled: [`Poison`](super::Poison) passes the actor away, anything
    /// else becomes a dead letter ([`DeadLetterReason::Unhandled`](super::DeadLetterReason)).
    No(EventHandle),
}
