//! Messages: immutable shared payloads, mutable single-receiver payloads, signals.

use std::any::TypeId;
use std::fmt;
use std::marker::PhantomData;

use parking_lot::Mutex;

pub(crate) use node::InlineBits;
use node::{NodePtr, Payload, TakeOnce};

mod node;
mod pool;

/// Marker for the *mutable* flavour of message type `T`.
///
/// A mutable message is delivered to exactly one receiver, which takes the value by move. It
/// can travel only through single-consumer mboxes (an agent's direct mbox, a
/// unique-subscribers mbox); sending it to, or subscribing to it from, a multi-consumer mbox
/// is a typed error. `Mutable<T>` and `T` are different message types: a handler for `T`
/// does not see `Mutable<T>`, and the other way round.
///
/// The type is never constructed; it names the mutable message type where an API takes a
/// message type as a type parameter (`ctx.limit_then_drop::<Mutable<Job>>(10)`,
/// `transfer_to_state::<Mutable<Job>>`). Its [`MessageType`] is
/// [`MessageType::of_mutable::<T>()`](MessageType::of_mutable). It is not `Sync`, so it can
/// never be taken for an immutable message type: [`MessageType::of`] and the immutable
/// `send`/`event` refuse it at compile time.
///
/// # Examples
///
/// ```
/// use agentbox::{MessageType, Mutable};
/// assert_ne!(MessageType::of_mutable::<String>(), MessageType::of::<String>());
/// assert!(MessageType::of_mutable::<String>().is_mutable());
/// ```
///
/// ```compile_fail
/// use agentbox::{MessageType, Mutable};
/// let _ = MessageType::of::<Mutable<String>>();
/// ```
pub struct Mutable<T>(
    PhantomData<fn() -> T>,
    PhantomData<std::cell::Cell<()>>,
    Never,
);

impl<T> fmt::Debug for Mutable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never called: a `Mutable<T>` cannot exist.
        write!(f, "Mutable<{}>", std::any::type_name::<T>())
    }
}

enum Never {}

/// The identity of a message type as mboxes and subscriptions see it.
///
/// Two values are equal when they name the same Rust type with the same mutability (the
/// mutable flavour of `T` is keyed by the `TypeId` of [`Mutable<T>`]). Which flavour a
/// value is comes from the constructor, never from the type's name: [`of`](Self::of) is
/// the immutable flavour (immutable messages are shared between threads, so `T: Sync`),
/// [`of_mutable`](Self::of_mutable) the mutable one.
#[derive(Clone, Copy)]
pub struct MessageType {
    id: TypeId,
    name: &'static str,
    mutable: bool,
}

impl MessageType {
    /// The immutable message type `T`.
    pub fn of<T: Sync + 'static>() -> Self {
        MessageType {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
            mutable: false,
        }
    }

    /// The identity of a type a user named as a type parameter, which may be
    /// `Mutable<U>`: right for keying (limits, filters, state actions), but its flavour
    /// is not known (reported immutable). Subscription checks that need the flavour use
    /// `of`/`of_mutable`, whose callers know it statically.
    pub(crate) fn named<T: 'static>() -> Self {
        MessageType {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
            mutable: false,
        }
    }

    /// The mutable flavour of `T`, keyed by the `TypeId` of [`Mutable<T>`].
    pub fn of_mutable<T: 'static>() -> Self {
        MessageType {
            id: TypeId::of::<Mutable<T>>(),
            name: std::any::type_name::<Mutable<T>>(),
            mutable: true,
        }
    }

    /// A message type from the parts of one taken apart (where its `TypeId` is kept
    /// anyway, as a key).
    pub(crate) fn from_parts(id: TypeId, name: &'static str, mutable: bool) -> Self {
        MessageType { id, name, mutable }
    }

    /// The `TypeId` this message type is keyed by.
    pub fn type_id(&self) -> TypeId {
        self.id
    }

    /// The Rust type name, for diagnostics.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether this is a [`Mutable`] message type.
    pub fn is_mutable(&self) -> bool {
        self.mutable
    }
}

impl PartialEq for MessageType {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for MessageType {}
impl std::hash::Hash for MessageType {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state)
    }
}
impl fmt::Debug for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// One message instance in flight, type-erased.
///
/// Cloning is cheap (one reference count): every receiver of an immutable message shares one
/// payload. A *signal* — a message type with no data and no `Drop` (a unit struct) — costs
/// no allocation and no reference count: the process keeps one payload per signal type
/// (a few bytes each, for the process's lifetime) and every message of it points there.
/// And a small message type without `Drop` (an id, a counter) reuses the thread's last
/// spent payload of its type when nothing refers to it any more, so a conversation between
/// agents of one worker allocates nothing per message. A message is 8 bytes (one pointer),
/// and one of at most 8 bytes without `Drop`, sent from another thread to an agent's own
/// direct mbox on a single-threaded dispatcher, waits in the queue as its bytes, with no
/// allocation. All of this is invisible to handlers: each receiver sees the value sent.
///
/// Custom mboxes receive and forward `Message`s; agents see the typed payload in their
/// handlers.
///
/// # Examples
///
/// ```
/// use agentbox::{Message, MessageType};
/// let m = Message::new(42u32);
/// assert_eq!(m.message_type(), MessageType::of::<u32>());
/// assert_eq!(m.downcast_ref::<u32>(), Some(&42));
/// ```
#[derive(Clone)]
pub struct Message {
    // 8 bytes, one thin pointer (see `node`): a queued message is a 24-byte demand (agent
    // key, mbox id, this), so a backlog costs 24 bytes per message plus the payload's
    // allocation (none for a signal). A fat `Arc<dyn _>` made the demand 32 bytes, and the
    // backlog's bytes showed in the pipeline and fan-out profiles (page faults, cache
    // misses) more than the instructions did.
    node: NodePtr,
}

/// Why the runtime wants to look inside an enveloped message.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Access {
    /// A delivery filter is about to inspect the payload (on the sender's thread).
    Inspection,
    /// A message limit is about to transform the payload (on the sender's thread).
    Transformation,
    /// A handler was found and is about to be called (on the receiver's worker).
    Handling,
}

/// A wrapper that travels around a message and decides, each time the runtime wants to look
/// inside, whether to reveal the payload (SObjectizer's enveloped messages).
///
/// An enveloped message keeps the type of the message inside it, so it is routed, filtered
/// and subscribed to exactly like that message. When an envelope says no, the message is
/// treated as not there: a filter rejects it, a limit drops it, no handler is called.
/// The envelope is dropped with the last copy of the message, which tells it that every
/// receiver is done with it (handled or dropped).
///
/// # Examples
///
/// A message that can be revoked after it was sent, even while it waits in a queue:
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use agentbox::{Access, Envelope, Message};
///
/// struct Revocable(Arc<AtomicBool>);
/// impl Envelope for Revocable {
///     fn reveal(&self, _access: Access) -> bool {
///         !self.0.load(Ordering::Acquire)
///     }
/// }
///
/// let revoked = Arc::new(AtomicBool::new(false));
/// let msg = Message::enveloped(Message::new(7u32), Revocable(revoked.clone()));
/// assert_eq!(msg.reveal(Access::Handling).and_then(|m| m.downcast_ref::<u32>()), Some(&7));
/// revoked.store(true, Ordering::Release);
/// assert!(msg.reveal(Access::Handling).is_none());
/// ```
pub trait Envelope: Send + Sync + 'static {
    /// Whether the payload may be seen for `access` now.
    fn reveal(&self, access: Access) -> bool;
}

/// An envelope with the message it carries.
struct Enveloped<E> {
    inner: Message,
    envelope: E,
}

impl<E: Envelope> Payload for Enveloped<E> {
    // Unused: an envelope's message type is its inner message's (`Message::type_id`).
    const MESSAGE_TYPE_ID: TypeId = TypeId::of::<Self>();
    const ENVELOPED: bool = true;
    fn message_type(&self) -> MessageType {
        self.inner.message_type()
    }
    fn envelope(&self) -> Option<(&dyn Envelope, &Message)> {
        Some((&self.envelope, &self.inner))
    }
}

/// An immutable payload (`transparent`: an `INLINE` one's bytes are the value's).
#[repr(transparent)]
struct Shared<T>(T);

impl<T: Send + Sync + 'static> Payload for Shared<T> {
    const MESSAGE_TYPE_ID: TypeId = TypeId::of::<T>();
    const REUSABLE: bool = reusable::<T>();
    const INLINE: bool = inline::<T>();
    fn message_type(&self) -> MessageType {
        MessageType::of::<T>()
    }
}

/// A mutable payload: taken exactly once by its one receiver.
struct MutableSlot<T>(TakeOnce<T>);

impl<T: Send + 'static> Payload for MutableSlot<T> {
    const MESSAGE_TYPE_ID: TypeId = TypeId::of::<Mutable<T>>();
    const POOLED: bool = true;
    fn message_type(&self) -> MessageType {
        MessageType::of_mutable::<T>()
    }
}

impl Message {
    /// Wraps an immutable message.
    ///
    /// A signal (a type of size zero without `Drop`) is not allocated: the process's one
    /// payload for its type is used.
    #[inline]
    pub fn new<T: Send + Sync + 'static>(value: T) -> Self {
        if std::mem::size_of::<T>() == 0 && !std::mem::needs_drop::<T>() {
            return signal::<T>(value);
        }
        if reusable::<T>() {
            return reused_payload(value);
        }
        Message::of(Shared(value))
    }

    /// Hands a spent message's payload to this thread's pool if nothing else refers to it
    /// and its type is reusable; otherwise just drops it. The runtime calls this for a
    /// demand it has run. (Always inlined: out of line in the worker's loop it cost ~10
    /// instructions per message more, callgrind.)
    #[inline(always)]
    pub(crate) fn recycle(self) {
        if self.node.is_spent() {
            keep_payload(self);
        }
    }

    /// The payload of a small immutable message (at most 8 bytes, no `Drop`, no envelope)
    /// out of its allocation, if nothing else refers to it; the allocation is kept for
    /// this thread's next message of the type. A queue keeps these 16 bytes instead of the
    /// message (`Demand::direct`): a queued small message then takes no allocation, and
    /// the sender and the receiver each refill one they kept.
    ///
    /// Nothing can tell: the message had one reference, so its one receiver gets the
    /// value (moved, never copied to two places), in a message made by
    /// [`from_inline`](Self::from_inline).
    #[inline]
    pub(crate) fn into_inline(mut self) -> Result<InlineBits, Message> {
        match self.node.take_bits() {
            Some(inline) => {
                keep_payload(self);
                Ok(inline)
            }
            None => Err(self),
        }
    }

    /// The message of a payload taken out by [`into_inline`](Self::into_inline): this
    /// thread's spent allocation refilled if it has the payload's type, or a new one.
    #[inline]
    pub(crate) fn from_inline(inline: InlineBits) -> Message {
        let mut inline = inline;
        if let Ok(Some(mut m)) = SPENT.try_with(|s| s.take()) {
            match m.node.refill_with(inline) {
                Ok(()) => return m,
                Err(back) => {
                    inline = back;
                    let _ = SPENT.try_with(|s| s.set(Some(m)));
                }
            }
        }
        Message {
            node: NodePtr::from_bits(inline),
        }
    }

    /// Wraps a mutable message: its type is `Mutable<T>` and one receiver takes the value.
    ///
    /// A small mutable message's allocation (a value of up to ~230 bytes) comes from the
    /// thread's cache of freed ones: its receiver frees it where it ran, so a conversation
    /// by mutable messages between agents of one worker, or a burst from one agent to
    /// another on its worker, reuses the same few blocks instead of calling the allocator.
    #[inline]
    pub fn new_mutable<T: Send + 'static>(value: T) -> Self {
        Message::of(MutableSlot(TakeOnce::new(value)))
    }

    /// [`new_mutable`](Self::new_mutable) of the value `make` returns, made after the
    /// message's allocation is taken, so that an inlined `make` builds it in place (the
    /// YDB layer's send path: its 112-byte delivery was built on the stack and copied).
    #[inline(always)]
    pub(crate) fn new_mutable_with<T: Send + 'static>(make: impl FnOnce() -> T) -> Self {
        Message {
            node: NodePtr::new_with(|| MutableSlot(TakeOnce::new(make()))),
        }
    }

    /// Puts `inner` into `envelope`. The result has `inner`'s type (and mutability) and is
    /// delivered like it; see [`Envelope`].
    pub fn enveloped<E: Envelope>(inner: Message, envelope: E) -> Self {
        Message::of(Enveloped { inner, envelope })
    }

    /// A message that stands for none, where a `Message` must be. A signal: nothing is
    /// allocated.
    pub(crate) fn placeholder() -> Self {
        /// Its type; no handler can subscribe to it.
        struct NoMessage;
        Message::new(NoMessage)
    }

    #[inline]
    fn of<P: Payload>(payload: P) -> Self {
        Message {
            node: NodePtr::new(payload),
        }
    }

    /// Whether this message travels in an envelope.
    pub fn is_enveloped(&self) -> bool {
        self.node.envelope().is_some()
    }

    /// The message to use for `access`: this message itself if it has no envelope; the
    /// message inside (through any nested envelopes) if every envelope reveals it; `None`
    /// if one of them refuses.
    #[inline]
    pub fn reveal(&self, access: Access) -> Option<&Message> {
        match self.node.envelope() {
            None => Some(self),
            Some((envelope, inner)) => {
                if envelope.reveal(access) {
                    inner.reveal(access)
                } else {
                    None
                }
            }
        }
    }

    /// The envelope of type `E` around this message, if that is the outermost envelope.
    pub fn envelope_ref<E: Envelope>(&self) -> Option<&E> {
        self.node.downcast::<Enveloped<E>>().map(|e| &e.envelope)
    }

    /// The type this message is delivered as.
    pub fn message_type(&self) -> MessageType {
        self.node.message_type()
    }

    /// The `TypeId` of [`message_type`](Self::message_type), without the rest.
    #[inline]
    pub fn type_id(&self) -> TypeId {
        match self.node.message_type_id() {
            (id, false) => id,
            (_, true) => self.enveloped_type_id(),
        }
    }

    /// [`type_id`](Self::type_id) if this message is not an envelope (`None`: ask
    /// `type_id`). For a send path that leaves envelopes to a slower lane: no call on the
    /// way, so the message can stay in a register.
    #[inline]
    pub(crate) fn plain_type_id(&self) -> Option<TypeId> {
        match self.node.message_type_id() {
            (id, false) => Some(id),
            (_, true) => None,
        }
    }

    #[cold]
    #[inline(never)]
    fn enveloped_type_id(&self) -> TypeId {
        match self.node.envelope() {
            Some((_, inner)) => inner.type_id(),
            None => self.node.message_type_id().0,
        }
    }

    /// The payload of an immutable message of type `T`; `None` for any other type, for
    /// mutable messages, and for an enveloped message (see [`reveal`](Self::reveal)).
    #[inline]
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.node.downcast::<Shared<T>>().map(|s| &s.0)
    }

    /// The payload a handler of `T` gets: the plain payload, or (cold path) the one inside
    /// the envelopes if they reveal it for [`Access::Handling`]. Checking the plain payload
    /// first keeps envelopes free for messages that have none.
    #[inline]
    pub(crate) fn handler_payload<T: 'static>(&self) -> Option<&T> {
        match self.downcast_ref::<T>() {
            Some(v) => Some(v),
            None => self.revealed_for_handler()?.downcast_ref::<T>(),
        }
    }

    /// [`handler_payload`](Self::handler_payload) for a mutable message: takes the value.
    #[inline]
    pub(crate) fn handler_take<T: Send + 'static>(&self) -> Option<T> {
        match self.take_mutable::<T>() {
            Some(v) => Some(v),
            None => self.revealed_for_handler()?.take_mutable::<T>(),
        }
    }

    /// [`handler_take`](Self::handler_take) by the message's owner: when no other
    /// reference to its node exists (a mutable message's usual case: one receiver), the
    /// value is taken without the take-once flag's atomic swap, the last atomic
    /// read-modify-write on a YDB event's path (~20 cycles per event, where the rest of
    /// the hop has none). Otherwise (a copy exists, an envelope) as `handler_take`.
    ///
    /// A hook on purpose, for the core's mutable handlers: they get `&Message` today
    /// (`SubscriptionBuilder::event_mutable`), so they cannot call it yet; the demand
    /// that owns the message can lend it `&mut`.
    #[cfg_attr(not(test), allow(dead_code))]
    #[inline]
    pub(crate) fn handler_take_owned<T: Send + 'static>(&mut self) -> Option<T> {
        match self.node.unique_mut::<MutableSlot<T>>() {
            Some(slot) => slot.0.take_mut(),
            None => self.handler_take::<T>(),
        }
    }

    #[cold]
    #[inline(never)]
    fn revealed_for_handler(&self) -> Option<&Message> {
        self.node.envelope()?;
        self.reveal(Access::Handling)
    }

    /// Takes the value of a mutable message of type `Mutable<T>`; `None` if it was taken
    /// already or the type differs.
    pub(crate) fn take_mutable<T: Send + 'static>(&self) -> Option<T> {
        self.node
            .downcast::<MutableSlot<T>>()
            .and_then(|slot| slot.0.take())
    }
}

/// Signal types a thread remembers where their payloads are; others are looked up in the
/// process's list each time.
const SIGNAL_TYPES_PER_THREAD: usize = 64;

/// The process's payload of one signal type (see [`signal`]).
struct SignalPayload {
    id: TypeId,
    /// A static node: copies of it count nothing.
    node: NodePtr,
}

/// The process's signal payloads, one per signal type ever sent: a program has a fixed set
/// of types, so the list is bounded, and each entry is a few bytes that live as long as
/// the process.
static SIGNALS: Mutex<Vec<&'static SignalPayload>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's copy of the entries of [`SIGNALS`] it has used (a short list: programs
    /// have few signal types, and a linear scan of a few entries beats hashing and the
    /// process's lock).
    static KNOWN_SIGNALS: std::cell::RefCell<Vec<&'static SignalPayload>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A message of signal type `T` (size zero, no `Drop`): every message of it is the same
/// value, so one payload for the process is indistinguishable from one per message, and
/// copies of it count nothing.
#[inline]
fn signal<T: Send + Sync + 'static>(value: T) -> Message {
    let id = TypeId::of::<T>();
    let known = KNOWN_SIGNALS.try_with(|s| s.borrow().iter().copied().find(|p| p.id == id));
    let p = match known {
        Ok(Some(p)) => p,
        _ => new_signal_payload(id, value),
    };
    Message {
        node: p.node.clone(),
    }
}

/// The payload of a signal type this thread has not sent before.
#[cold]
#[inline(never)]
fn new_signal_payload<T: Send + Sync + 'static>(id: TypeId, value: T) -> &'static SignalPayload {
    let p = {
        let mut all = SIGNALS.lock();
        match all.iter().copied().find(|p| p.id == id) {
            Some(p) => p,
            None => {
                // Leaked on purpose, once per type: the node is a header (`Shared<T>` has
                // size zero) and the entry a few words.
                let node = NodePtr::new_static(Shared(value));
                let p: &'static SignalPayload = Box::leak(Box::new(SignalPayload { id, node }));
                all.push(p);
                p
            }
        }
    };
    // Fails only while the thread goes away (a send from a thread-local destructor).
    let _ = KNOWN_SIGNALS.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SIGNAL_TYPES_PER_THREAD {
            s.push(p);
        }
    });
    p
}

/// Whether payloads of `T` are reused: data without `Drop` (keeping a spent value is then
/// unobservable) and small (the pool stays small).
#[inline]
const fn reusable<T>() -> bool {
    std::mem::size_of::<T>() != 0
        && std::mem::size_of::<T>() <= REUSABLE_MAX_SIZE
        && !std::mem::needs_drop::<T>()
}

/// Whether a payload of `T` may be queued without its node (see [`Message::into_inline`]):
/// data without `Drop` that fits in 8 bytes.
#[inline]
const fn inline<T>() -> bool {
    std::mem::size_of::<T>() != 0
        && std::mem::size_of::<T>() <= 8
        && std::mem::align_of::<T>() <= 8
        && !std::mem::needs_drop::<T>()
}

/// Largest value size of a reusable payload, in bytes.
const REUSABLE_MAX_SIZE: usize = 64;
thread_local! {
    /// This thread's last spent message (unshared, reusable type), for [`reused_payload`].
    static SPENT: std::cell::Cell<Option<Message>> = const { std::cell::Cell::new(None) };
}

/// A message holding `value`: this thread's last spent payload refilled if it has type
/// `T`, or a new one.
///
/// A message's payload is an allocation; one agent sending to another on the same worker
/// (ping-pong, a ring, request and reply) frees one and allocates one per message. One
/// spent payload kept per thread turns that pair into a refill, and saves the two atomic
/// operations of the last reference's drop (measured on the ping-pong benchmark; a pool
/// per type cost as many instructions as the allocator's own per-thread cache).
#[inline]
fn reused_payload<T: Send + Sync + 'static>(value: T) -> Message {
    if let Ok(Some(mut m)) = SPENT.try_with(|s| s.take()) {
        // Unique: the thread's slot held the only reference.
        if let Some(slot) = m.node.unique_mut::<Shared<T>>() {
            slot.0 = value;
            return m;
        }
        // Another type's: left for its own next message.
        let _ = SPENT.try_with(|s| s.set(Some(m)));
    }
    Message::of(Shared(value))
}

/// Keeps a spent, unreferenced message for reuse (replacing the one kept before).
#[inline]
fn keep_payload(m: Message) {
    let _ = SPENT.try_with(|s| s.set(Some(m)));
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("type", &self.message_type())
            .finish()
    }
}

/// The depth of redirection a message has gone through: a forwarding mbox increments it, and
/// a message that would pass [`MAX_REDIRECTION_DEPTH`] is dropped.
pub type RedirectionDepth = u32;

/// A message whose redirection depth would exceed this is dropped (SObjectizer's limit).
pub const MAX_REDIRECTION_DEPTH: RedirectionDepth = 32;

#[cfg(test)]
mod tests;
