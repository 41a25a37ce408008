//! [`EventHandle`]: one event in flight with its envelope of YDB fields.

use std::any::Any;
use std::cell::OnceCell;
use std::fmt;

use super::event::{Event, EventType};
use super::flags::EventFlags;
use super::id::ActorId;

/// Makes the payload of a received event of one type from its bytes (the interconnect's
/// hook: it knows the codec of each remote event type, and builds this function with
/// [`serialized_as`]). The payload has room for the decoded value, typed: a handler's
/// first ask decodes into it, with no allocation of its own.
pub(crate) type DecodeFn = fn(Body) -> Received;

/// The payload of a received event, as a [`DecodeFn`] makes it.
pub(crate) struct Received(Box<dyn Payload>);

/// The bytes of a serialized event: a small body lives in the payload's own allocation.
pub(crate) type Body = smallvec::SmallVec<[u8; 128]>;

/// A serialized event (the interconnect's form), boxed as the payload like a local event:
/// its bytes, its decode hook, and `decoded`, a [`Slot`] of its type (`()` when no codec
/// is known). Decoded at most once, when a handler first asks for the event as its type.
pub(crate) struct Serialized<S: ?Sized = dyn Any + Send> {
    bytes: Body,
    decode: Option<DecodeFn>,
    decoded: S,
}

/// The decoded value of a serialized `E`, once asked for, and how to decode it.
struct Slot<E> {
    value: OnceCell<Option<E>>,
    decode: fn(&[u8]) -> Option<E>,
}

/// The payload of a received `E` with `bytes`: `this` is the [`DecodeFn`] being run (kept
/// to send the event on), `decode` decodes the bytes (`None` when they do not decode).
#[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
pub(crate) fn serialized_as<E: Event>(
    bytes: Body,
    this: DecodeFn,
    decode: fn(&[u8]) -> Option<E>,
) -> Received {
    Received(Box::new(Serialized {
        bytes,
        decode: Some(this),
        decoded: Slot {
            value: OnceCell::new(),
            decode,
        },
    }))
}

impl Serialized {
    /// The decoded value as an `E`, decoding now if this is the first ask.
    fn value<E: Event>(&self) -> Option<&E> {
        let slot = self.decoded.downcast_ref::<Slot<E>>()?;
        slot.value
            .get_or_init(|| (slot.decode)(&self.bytes))
            .as_ref()
    }

    /// The decoded `E`, if [`value`](Self::value) decoded it.
    fn value_mut<E: Event>(&mut self) -> Option<&mut E> {
        let slot = self.decoded.downcast_mut::<Slot<E>>()?;
        slot.value.get_mut()?.as_mut()
    }
}

/// What a handle carries, boxed: a [`Local`] value or a [`Serialized`] event (a trait
/// object, so that the handle keeps one fat pointer for either; a `Local<E>` is found by
/// its type as the value was before, with one `type_id` call).
trait Payload: Any + Send {
    /// The local value, as `Any` (not for a serialized event).
    fn local(&self) -> Option<&(dyn Any + Send)>;
    /// The serialized event (not for a local value).
    fn serialized(&self) -> Option<&Serialized>;
    /// The serialized event, mutably.
    fn serialized_mut(&mut self) -> Option<&mut Serialized>;
}

/// A local event as the payload.
struct Local<E>(E);

impl<E: Event> Payload for Local<E> {
    fn local(&self) -> Option<&(dyn Any + Send)> {
        Some(&self.0)
    }
    fn serialized(&self) -> Option<&Serialized> {
        None
    }
    fn serialized_mut(&mut self) -> Option<&mut Serialized> {
        None
    }
}

impl<S: Any + Send> Payload for Serialized<S> {
    fn local(&self) -> Option<&(dyn Any + Send)> {
        None
    }
    fn serialized(&self) -> Option<&Serialized> {
        Some(self)
    }
    fn serialized_mut(&mut self) -> Option<&mut Serialized> {
        Some(self)
    }
}

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
    /// The event; `None` once taken.
    payload: Option<Box<dyn Payload>>,
}

// Kept small: a handle is moved several times per hop.
const _: () = assert!(std::mem::size_of::<EventHandle>() <= 88);

impl EventHandle {
    /// A handle carrying `event` from `sender` to `recipient`, no flags, cookie 0.
    pub fn new<E: Event>(recipient: ActorId, sender: ActorId, event: E) -> EventHandle {
        let mut h = Self::header(E::EVENT_TYPE, recipient, sender);
        h.payload = Some(Box::new(Local(event)));
        h
    }

    /// A handle carrying a serialized event of type `event_type` (the interconnect's form:
    /// the receiver decodes the bytes by the type).
    pub fn serialized(
        event_type: EventType,
        recipient: ActorId,
        sender: ActorId,
        bytes: Vec<u8>,
    ) -> EventHandle {
        Self::serialized_with(event_type, recipient, sender, Body::from_vec(bytes), None)
    }

    /// A serialized event that [`get`](Self::get) and [`take`](Self::take) decode on first
    /// ask with `decode` (the interconnect's received events).
    pub(crate) fn serialized_with(
        event_type: EventType,
        recipient: ActorId,
        sender: ActorId,
        bytes: Body,
        decode: Option<DecodeFn>,
    ) -> EventHandle {
        let mut h = Self::header(event_type, recipient, sender);
        h.payload = Some(match decode {
            Some(decode) => decode(bytes).0,
            None => Box::new(Serialized {
                bytes,
                decode: None,
                decoded: (),
            }),
        });
        h
    }

    /// A handle with the fields of an event of `event_type` and no event yet (the remote
    /// path: the value is encoded from a reference and boxed only if it is not delivered,
    /// with [`set_event`](Self::set_event)).
    #[inline]
    pub(crate) fn header(
        event_type: EventType,
        recipient: ActorId,
        sender: ActorId,
    ) -> EventHandle {
        EventHandle {
            event_type,
            flags: EventFlags::empty(),
            recipient,
            rewrite: recipient,
            sender,
            cookie: 0,
            forward_target: None,
            payload: None,
        }
    }

    /// Puts `event` in a [`header`](Self::header) handle (its type is `E`'s).
    pub(crate) fn set_event<E: Event>(&mut self, event: E) {
        debug_assert_eq!(self.event_type, E::EVENT_TYPE);
        self.payload = Some(Box::new(Local(event)));
    }

    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    /// The local event as `Any`, if it is a local value and not taken (the interconnect
    /// encodes it by its type).
    pub(crate) fn local_any(&self) -> Option<&(dyn Any + Send)> {
        self.payload.as_ref()?.local()
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

    /// Whether the handle carries an event of type `E` that [`get`](Self::get) would give
    /// (not taken): a local `E`, or an event of `E`'s type from another node that decodes
    /// as an `E` (it is decoded here, on the first ask).
    ///
    /// An event from another node whose type has no codec registered on this node
    /// ([`InterconnectSetup::event`](crate::interconnect::InterconnectSetup::event)), or
    /// whose bytes do not decode, is not an `E`: `is` is false and the bytes stay readable
    /// with [`serialized_bytes`](Self::serialized_bytes). The interconnect logs the first
    /// such event of each type (of the first 256 types it meets) through the environment's
    /// error logger and counts them in
    /// [`SessionStats::events_without_codec`](crate::interconnect::SessionStats::events_without_codec).
    pub fn is<E: Event>(&self) -> bool {
        self.get::<E>().is_some()
    }

    /// The event, if it is an `E` and has not been taken.
    ///
    /// An event that came from another node is decoded here, on the first ask (the
    /// interconnect knows the codec of each registered remote event type); a local send
    /// never serializes.
    pub fn get<E: Event>(&self) -> Option<&E> {
        if self.event_type != E::EVENT_TYPE {
            return None;
        }
        let p: &dyn Any = &**self.payload.as_ref()?;
        match p.downcast_ref::<Local<E>>() {
            Some(l) => Some(&l.0),
            None => Self::decoded(self.payload.as_deref()?),
        }
    }

    #[cold]
    fn decoded<E: Event>(p: &dyn Payload) -> Option<&E> {
        p.serialized()?.value::<E>()
    }

    /// The event, mutably, if it is an `E` and has not been taken (decoded first if it
    /// came from another node).
    pub fn get_mut<E: Event>(&mut self) -> Option<&mut E> {
        self.get::<E>()?;
        let p = self.payload.as_mut()?;
        if p.serialized().is_some() {
            return p.serialized_mut()?.value_mut::<E>();
        }
        let p: &mut dyn Any = &mut **p;
        p.downcast_mut::<Local<E>>().map(|l| &mut l.0)
    }

    /// Takes the event out if it is an `E` (decoded first if it came from another node); the
    /// handle keeps its fields.
    pub fn take<E: Event>(&mut self) -> Option<E> {
        self.get::<E>()?;
        let mut p = self.payload.take()?;
        if let Some(s) = p.serialized_mut() {
            return s.decoded.downcast_mut::<Slot<E>>()?.value.take()?;
        }
        let p: Box<dyn Any> = p;
        p.downcast::<Local<E>>().ok().map(|l| l.0)
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

    /// The bytes of a serialized event (one that came from another node).
    pub fn serialized_bytes(&self) -> Option<&[u8]> {
        Some(self.payload.as_ref()?.serialized()?.bytes.as_slice())
    }

    #[cfg_attr(not(feature = "interconnect"), allow(dead_code))]
    /// The decode hook of a serialized event (kept when the interconnect sends it on).
    pub(crate) fn decoder(&self) -> Option<DecodeFn> {
        self.payload.as_ref()?.serialized()?.decode
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
