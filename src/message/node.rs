//! The allocation behind a message, reached through one thin pointer.
//!
//! A node is a header (a reference count and the table of its payload type) followed by the
//! payload. A [`Message`] is a [`NodePtr`]: 8 bytes, where a fat `Arc<dyn Payload>` took
//! 16. A queued message is a demand (agent key, mbox id, message), so the demand is 24
//! bytes, not 32, and a backlog of a million small messages takes 8 MB less.
//! The pipeline and fan-out profiles showed a backlog's bytes (page faults and cache misses)
//! where the instructions were already few.
//!
//! The table is a `'static` value per payload type (a promoted constant: the compiler may
//! keep more than one copy, so equal addresses mean the same type, not the other way
//! round): the ids that route and downcast a message, and the payload's `drop`. Reading a
//! message's type is a load from its header and one from the table; no call, for every
//! payload but an envelope.
//!
//! A signal's node lives as long as the process (one per signal type) and is counted by no
//! one: its pointer carries the tag bit `STATIC`, and copying or dropping it touches no
//! counter.
//!
//! A small payload may leave its node as its bytes ([`InlineBits`], for a queue to keep) and
//! come back in another node of its type.
//!
//! A mutable message's node is allocated from the thread's cache of freed blocks
//! ([`pool`](super::pool)) when it is small enough; every other node is a `Box`.
//!
//! Everything `unsafe` of the message layer is here and in `pool`, behind the safe
//! [`NodePtr`] API and the one unsafe constructor `InlineBits::from_raw`; the modules'
//! tests run under miri (`.ci/run`), and the reference count has a loom model
//! (`loom_tests`).

#![allow(unsafe_code)]

use std::alloc::Layout;
use std::any::TypeId;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr::NonNull;
use std::sync::atomic::AtomicBool;

use crate::sync::{fence, AtomicUsize, Ordering};

use super::{pool, Envelope, Message, MessageType};

/// What a payload type gives its node's table.
pub(super) trait Payload: Send + Sync + Sized + 'static {
    /// The `TypeId` of the message type, for every payload but an envelope (whose type is
    /// that of the message inside it).
    const MESSAGE_TYPE_ID: TypeId;
    /// Whether a spent, unshared payload of this type may be refilled by the next message
    /// of its type (see `Message::recycle`).
    const REUSABLE: bool = false;
    /// Whether [`envelope`](Self::envelope) may return `Some`.
    const ENVELOPED: bool = false;
    /// Whether the node is allocated from the thread's cache of freed blocks
    /// ([`pool`](super::pool)) when it is small enough: a mutable message's slot, whose
    /// node is freed by its one receiver, often on the sender's own thread.
    const POOLED: bool = false;
    /// Whether the payload's bytes may travel without their node ([`InlineBits`]): at
    /// most 8 bytes, aligned to at most 8, with no `Drop`.
    const INLINE: bool = false;
    /// The message type (the cold path: names, errors, tracing).
    fn message_type(&self) -> MessageType;
    /// The envelope and the message inside it, for an envelope.
    fn envelope(&self) -> Option<(&dyn Envelope, &Message)> {
        None
    }
}

/// The tag bit of a node that lives as long as the process and is not counted (nodes are
/// aligned to 8, so the low bit of their address is free).
const STATIC: usize = 1;

/// The start of every node.
#[repr(C)]
struct Header {
    /// References; unused (and never touched) in a static node.
    count: AtomicUsize,
    table: &'static Table,
}

/// A header and its payload, in one allocation (`repr(C)`: the header is at offset 0, so
/// a pointer to the node is a pointer to its header).
#[repr(C)]
struct Node<P> {
    header: Header,
    payload: P,
}

/// What a node's pointer needs to know of its payload type.
pub(super) struct Table {
    /// `TypeId` of the payload type `P` itself (downcasts).
    node_type: TypeId,
    /// See [`Payload::MESSAGE_TYPE_ID`].
    message_type_id: TypeId,
    reusable: bool,
    enveloped: bool,
    inline: bool,
    message_type: for<'a> unsafe fn(&'a NodePtr) -> MessageType,
    /// The payload's bytes (an `INLINE` payload's only).
    to_bits: unsafe fn(&NodePtr) -> MaybeUninit<u64>,
    /// A new node from an `INLINE` payload's bytes.
    from_bits: unsafe fn(&MaybeUninit<u64>) -> NodePtr,
    /// Overwrites the payload of a node no one else refers to with an `INLINE` payload's
    /// bytes.
    refill: unsafe fn(&mut NodePtr, &MaybeUninit<u64>),
    envelope: for<'a> unsafe fn(&'a NodePtr) -> Option<(&'a dyn Envelope, &'a Message)>,
    /// Frees the node; called once, by the last reference.
    drop: unsafe fn(*mut Header),
}

/// The one table of payload type `P`.
struct TableOf<P>(PhantomData<P>);

impl<P: Payload> TableOf<P> {
    const TABLE: Table = Table {
        node_type: TypeId::of::<P>(),
        message_type_id: P::MESSAGE_TYPE_ID,
        reusable: P::REUSABLE,
        enveloped: P::ENVELOPED,
        inline: P::INLINE,
        message_type: message_type_of::<P>,
        to_bits: to_bits::<P>,
        from_bits: from_bits::<P>,
        refill: refill::<P>,
        envelope: envelope_of::<P>,
        drop: drop_node::<P>,
    };

    /// The [`pool`](super::pool) class of a `POOLED` payload's node; `None` for the rest
    /// (and for nodes too large to pool): those are boxed.
    const CLASS: Option<usize> = if P::POOLED {
        pool::class_of(Layout::new::<Node<P>>())
    } else {
        None
    };
}

/// # Safety
/// `node`'s payload type is `P`.
unsafe fn message_type_of<P: Payload>(node: &NodePtr) -> MessageType {
    // SAFETY: the caller's promise.
    unsafe { node.payload_unchecked::<P>() }.message_type()
}

/// # Safety
/// `node`'s payload type is `P`.
unsafe fn envelope_of<P: Payload>(node: &NodePtr) -> Option<(&dyn Envelope, &Message)> {
    // SAFETY: the caller's promise.
    unsafe { node.payload_unchecked::<P>() }.envelope()
}

/// # Safety
/// `node`'s payload type is `P`, and `P` is `INLINE` (at most 8 bytes, aligned to at most
/// 8).
unsafe fn to_bits<P: Payload>(node: &NodePtr) -> MaybeUninit<u64> {
    debug_assert!(P::INLINE && size_of::<P>() <= 8 && align_of::<P>() <= 8);
    let mut bits = MaybeUninit::<u64>::uninit();
    // SAFETY: an untyped copy of the payload's `size_of::<P>()` bytes (padding included,
    // which may be uninitialised: `MaybeUninit` holds them as they are) into 8 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (node.payload_unchecked::<P>() as *const P).cast::<u8>(),
            bits.as_mut_ptr().cast::<u8>(),
            size_of::<P>(),
        )
    };
    bits
}

/// # Safety
/// `bits` came from [`to_bits::<P>`].
unsafe fn from_bits<P: Payload>(bits: &MaybeUninit<u64>) -> NodePtr {
    // SAFETY: the bytes of a `P` (the caller's promise), 8-aligned (`P`'s alignment is at
    // most 8): reading them back makes the value again, which its node gave up.
    NodePtr::new(unsafe { bits.as_ptr().cast::<P>().read() })
}

/// # Safety
/// `node` is a `Node<P>` that no other reference reaches; `bits` came from
/// [`to_bits::<P>`].
unsafe fn refill<P: Payload>(node: &mut NodePtr, bits: &MaybeUninit<u64>) {
    // SAFETY: the node is a `Node<P>`, reached only through `node` (the caller's promise);
    // `P` has no `Drop` (`INLINE`), so overwriting its value forgets nothing.
    unsafe {
        let payload = &raw mut (*node.untagged().cast::<Node<P>>()).payload;
        payload.write(bits.as_ptr().cast::<P>().read());
    }
}

/// # Safety
/// `header` is the header of a `Node<P>` made by [`NodePtr::new`], and nothing refers to it
/// any more.
unsafe fn drop_node<P: Payload>(header: *mut Header) {
    let node = header.cast::<Node<P>>();
    match TableOf::<P>::CLASS {
        // SAFETY: the caller's promise: a `Node<P>` in a block of `class` (`new` put it
        // there: the class is the type's), the last reference; dropped once, then the
        // block is given back (the cast is to the allocation's own type, with the
        // provenance of the whole block).
        Some(class) => unsafe {
            std::ptr::drop_in_place(node);
            pool::free_block(class, NonNull::new_unchecked(node.cast::<u8>()));
        },
        // SAFETY: the caller's promise: the pointer came from `Box::leak` of this very
        // type (the cast back is to the allocation's own type, with the provenance of the
        // whole node), and it is the last reference.
        None => drop(unsafe { Box::from_raw(node) }),
    }
}

/// A small payload out of its node: its bytes and the (exposed) address of its type's
/// table, 16 bytes that a queue may keep instead of a node (see `Demand::direct`).
///
/// Made only by `take_bits` (from a node) or by the unsafe [`from_raw`](Self::from_raw)
/// (from the parts of one), and consumed by value: the value it holds exists once.
pub(crate) struct InlineBits {
    bits: MaybeUninit<u64>,
    /// The table's address, at most [`MAX_TABLE_ADDR`](Self::MAX_TABLE_ADDR).
    table: usize,
}

impl InlineBits {
    /// The highest table address `take_bits` hands out: a queue may use the top two bits
    /// of a 64-bit word that holds it.
    pub(crate) const MAX_TABLE_ADDR: u64 = (1 << 62) - 1;

    /// The parts, for a queue to keep; [`from_raw`](Self::from_raw) makes them one again.
    pub(crate) fn into_raw(self) -> (MaybeUninit<u64>, usize) {
        (self.bits, self.table)
    }

    /// The payload whose parts [`into_raw`](Self::into_raw) gave.
    ///
    /// # Safety
    /// `bits` and `table` are the parts of one `InlineBits`, made one again once.
    pub(crate) unsafe fn from_raw(bits: MaybeUninit<u64>, table: usize) -> InlineBits {
        InlineBits { bits, table }
    }
}

/// A value taken at most once through a shared reference, without a lock: the payload of
/// a mutable message (its one receiver takes the value by move).
///
/// | `taken` | `value` |
/// |---|---|
/// | `false` | holds the value |
/// | `true` | moved out (or never refilled): uninitialised |
///
/// Races: two takers on two threads (copies of one message given to two receivers by a
/// custom mbox) swap the flag; exactly one reads `false` and moves the value out, the
/// other gets `None`. The value was written before the message was shared (its queue's
/// hand-over orders that), and a refill happens only through `&mut` on the one reference.
///
/// Found by the YDB layer's profile: a parking_lot lock and unlock (two atomic read-modify-
/// writes) around an `Option` per event; one swap now.
pub(crate) struct TakeOnce<T> {
    taken: AtomicBool,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is reached through `&self` only by the one `take` that swapped the
// flag from `false` (a move out, so only `T: Send` is needed), and otherwise only through
// `&mut self`.
unsafe impl<T: Send> Sync for TakeOnce<T> {}

impl<T> TakeOnce<T> {
    /// Holding `value`.
    #[inline]
    pub(crate) fn new(value: T) -> Self {
        TakeOnce {
            taken: AtomicBool::new(false),
            value: UnsafeCell::new(MaybeUninit::new(value)),
        }
    }

    /// The value, to the first caller only.
    #[inline]
    pub(crate) fn take(&self) -> Option<T> {
        if self.taken.swap(true, Ordering::Acquire) {
            return None;
        }
        // SAFETY: this call swapped the flag from `false`: the value is there, and no
        // other call reaches it again (they all read `true`); read once, left as bytes
        // that nothing drops (`Drop` sees `taken`).
        Some(unsafe { (*self.value.get()).assume_init_read() })
    }
}

impl<T> TakeOnce<T> {
    /// [`take`](Self::take) through the one reference to the slot: a plain read and
    /// write of the flag instead of its atomic swap (`&mut self` excludes every other
    /// taker).
    #[inline]
    pub(crate) fn take_mut(&mut self) -> Option<T> {
        let taken = self.taken.get_mut();
        if *taken {
            return None;
        }
        *taken = true;
        // SAFETY: the flag was `false`, so the value is there; `&mut self` excludes any
        // other access meanwhile; read once, left as bytes that nothing drops (`Drop` and
        // every later take see `taken`).
        Some(unsafe { self.value.get_mut().assume_init_read() })
    }
}

impl<T> Drop for TakeOnce<T> {
    fn drop(&mut self) {
        if !*self.taken.get_mut() {
            // SAFETY: not taken: the value is there, dropped once.
            unsafe { self.value.get_mut().assume_init_drop() }
        }
    }
}

/// A counted reference to a node, or an uncounted one to a static node (tag bit
/// [`STATIC`]).
pub(super) struct NodePtr(NonNull<Header>);

// SAFETY: a node's payload is `Send + Sync` (the `Payload` bound) and its header is an
// atomic count and a shared reference to an immutable table; the count is changed only
// atomically, and the payload is reached mutably only through the one reference
// (`unique_mut`).
unsafe impl Send for NodePtr {}
// SAFETY: as above.
unsafe impl Sync for NodePtr {}

impl NodePtr {
    /// A new node holding `payload`, counted once.
    #[inline]
    pub(super) fn new<P: Payload>(payload: P) -> NodePtr {
        Self::new_with(|| payload)
    }

    /// A new node holding the payload `make` returns, counted once. The block is taken
    /// first and `make` runs after, so that an inlined `make` writes its value straight
    /// into the node: made before, the value was built on the stack and copied in
    /// (callgrind, `ydb_send_by_id`: a 112-byte YDB delivery, ~14 instructions a send).
    /// A panic in `make` loses the block (a leak, never a double use). A payload type too
    /// large for the size classes is boxed: there `make` runs first, then the box is
    /// allocated.
    #[inline(always)]
    pub(super) fn new_with<P: Payload>(make: impl FnOnce() -> P) -> NodePtr {
        let Some(class) = TableOf::<P>::CLASS else {
            return NodePtr(NonNull::from(Box::leak(Self::boxed(make()))).cast());
        };
        let node = pool::alloc_block(class).cast::<Node<P>>();
        // SAFETY: a block of `P`'s node class: large and aligned enough for a `Node<P>`
        // (`class_of`), unused; `drop_node::<P>` gives it back to the same class. Should
        // `make` unwind, the block is never written nor reached again.
        unsafe {
            node.as_ptr().write(Node {
                header: Header {
                    count: AtomicUsize::new(1),
                    table: &TableOf::<P>::TABLE,
                },
                payload: make(),
            })
        };
        NodePtr(node.cast())
    }

    /// A node holding `payload` for the rest of the process, never counted nor freed (a
    /// signal type's one payload).
    pub(super) fn new_static<P: Payload>(payload: P) -> NodePtr {
        let node = NonNull::from(Box::leak(Self::boxed(payload))).cast::<Header>();
        NodePtr(node.map_addr(|a| a | STATIC))
    }

    #[inline]
    fn boxed<P: Payload>(payload: P) -> Box<Node<P>> {
        Box::new(Node {
            header: Header {
                count: AtomicUsize::new(1),
                table: &TableOf::<P>::TABLE,
            },
            payload,
        })
    }

    #[inline]
    fn is_static(&self) -> bool {
        self.0.addr().get() & STATIC != 0
    }

    /// The node's address without the tag, with the provenance of the whole node.
    #[inline]
    fn untagged(&self) -> *mut Header {
        self.0.as_ptr().map_addr(|a| a & !STATIC)
    }

    #[inline]
    fn header(&self) -> &Header {
        // SAFETY: the node lives while this reference to it does (counted, or static).
        unsafe { &*self.untagged() }
    }

    #[inline]
    fn table(&self) -> &'static Table {
        self.header().table
    }

    /// The payload as `P`, unchecked.
    ///
    /// # Safety
    /// The node's payload type is `P`.
    #[inline]
    unsafe fn payload_unchecked<P>(&self) -> &P {
        // SAFETY: the node lives while `self` does, it is a `Node<P>` by the caller's
        // promise, and its payload is only ever reached shared (but by `unique_mut`,
        // which holds the only reference).
        unsafe { &(*self.untagged().cast::<Node<P>>()).payload }
    }

    /// The payload if its type is `P`.
    #[inline]
    pub(super) fn downcast<P: 'static>(&self) -> Option<&P> {
        if self.table().node_type == TypeId::of::<P>() {
            // SAFETY: the table is `P`'s: the node is a `Node<P>`.
            Some(unsafe { self.payload_unchecked::<P>() })
        } else {
            None
        }
    }

    /// The payload, mutably, if its type is `P` and this is the only reference to it.
    #[inline]
    pub(super) fn unique_mut<P: 'static>(&mut self) -> Option<&mut P> {
        if self.table().node_type != TypeId::of::<P>() || !self.is_unique() {
            return None;
        }
        // SAFETY: a `Node<P>` (its table is `P`'s) that no other reference can reach: the
        // count is 1 and `&mut self` is that one, so no copy can be made while the borrow
        // lasts. The acquire load in `is_unique` ordered every former holder's last use
        // (their release decrements) before this.
        Some(unsafe { &mut (*self.untagged().cast::<Node<P>>()).payload })
    }

    /// Whether this is the only reference to a counted node.
    #[inline]
    pub(super) fn is_unique(&self) -> bool {
        !self.is_static() && self.header().count.load(Ordering::Acquire) == 1
    }

    /// `P::MESSAGE_TYPE_ID` of the payload type, and whether it is an envelope (whose
    /// message type is the inner message's).
    #[inline]
    pub(super) fn message_type_id(&self) -> (TypeId, bool) {
        let table = self.table();
        (table.message_type_id, table.enveloped)
    }

    /// See [`Payload::REUSABLE`].
    #[cfg(test)]
    pub(super) fn reusable(&self) -> bool {
        self.table().reusable
    }

    /// Whether the node may be kept for reuse: its payload type is `REUSABLE` and this is
    /// the only reference to it.
    #[inline]
    pub(super) fn is_spent(&self) -> bool {
        self.table().reusable && self.is_unique()
    }

    /// See [`Payload::message_type`].
    pub(super) fn message_type(&self) -> MessageType {
        // SAFETY: the table is the payload type's own.
        unsafe { (self.table().message_type)(self) }
    }

    /// See [`Payload::envelope`].
    #[inline]
    pub(super) fn envelope(&self) -> Option<(&dyn Envelope, &Message)> {
        let table = self.table();
        if !table.enveloped {
            return None;
        }
        // SAFETY: the table is the payload type's own.
        unsafe { (table.envelope)(self) }
    }

    /// The payload's bytes and its table's address, if the payload type is `INLINE` and
    /// this is the only reference to the node (so nothing can see the payload leave it).
    /// The node keeps a copy of the bytes, which nothing reads again: the next refill
    /// overwrites it.
    #[inline]
    pub(super) fn take_bits(&mut self) -> Option<InlineBits> {
        let table = self.table();
        if !table.inline || !self.is_unique() {
            return None;
        }
        let addr = (table as *const Table).expose_provenance();
        if addr as u64 > InlineBits::MAX_TABLE_ADDR {
            return None; // never on the platforms there are: user addresses are lower
        }
        Some(InlineBits {
            // SAFETY: the table is the payload type's own, and it is `INLINE`.
            bits: unsafe { (table.to_bits)(self) },
            table: addr,
        })
    }

    /// Refills this node with `inline`'s payload if it is the only reference to a node of
    /// the same payload type; gives `inline` back otherwise.
    #[inline]
    pub(super) fn refill_with(&mut self, inline: InlineBits) -> Result<(), InlineBits> {
        let table = self.table();
        if (table as *const Table).addr() != inline.table || !self.is_unique() {
            return Err(inline);
        }
        // SAFETY: the table at the address the bits came with (the same address: the same
        // bytes, so the same `node_type` and payload type; a type's table promoted twice
        // only makes this miss), and no other reference reaches the node.
        unsafe { (table.refill)(self, &inline.bits) };
        Ok(())
    }

    /// A new node holding `inline`'s payload.
    pub(super) fn from_bits(inline: InlineBits) -> NodePtr {
        // SAFETY: `inline.table` is the exposed address of a payload type's static table
        // and the bits came from that type's `to_bits` (`take_bits` made them, or
        // `from_raw`, whose caller vouches for that), once.
        unsafe {
            let table = &*std::ptr::with_exposed_provenance::<Table>(inline.table);
            (table.from_bits)(&inline.bits)
        }
    }

    /// The node's address (tests: whether two messages share a payload).
    #[cfg(test)]
    pub(super) fn addr(&self) -> usize {
        self.untagged().addr()
    }
}

impl Clone for NodePtr {
    #[inline]
    fn clone(&self) -> NodePtr {
        if !self.is_static() {
            // Relaxed, as `Arc`'s: a new reference is made from an existing one, which
            // keeps the node alive meanwhile.
            let old = self.header().count.fetch_add(1, Ordering::Relaxed);
            if old > isize::MAX as usize {
                // As `Arc`: billions of leaked copies would wrap the count.
                std::process::abort();
            }
        }
        NodePtr(self.0)
    }
}

impl Drop for NodePtr {
    #[inline]
    fn drop(&mut self) {
        if self.is_static() {
            return;
        }
        let header = self.header();
        // The only reference (the usual case: a message has one receiver) frees the node
        // without the read-modify-write: no other reference exists to be copied from or
        // dropped meanwhile, and the acquire load orders every former holder's last use
        // (their release decrement) before the free.
        if header.count.load(Ordering::Acquire) != 1 {
            if header.count.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            // Every other reference's last use happened before their release decrement.
            fence(Ordering::Acquire);
        }
        let drop = header.table.drop;
        // SAFETY: the count reached zero: this was the last reference to a node made by
        // `new` (static nodes return above), and its table's `drop` is its own type's.
        unsafe { drop(self.untagged()) }
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests {
    //! The reference count: the last reference frees the node once, after every other
    //! reference's last use, whether it decrements (shared) or sees itself alone (the
    //! load-only path of `Drop`).
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::sync::Arc;

    use super::*;

    /// A payload whose value each holder reads and whose drop writes it: loom reports the
    /// free if it is not ordered after a read.
    struct Watched(Arc<AtomicUsize>, UnsafeCell<u64>);
    // SAFETY: the cell is read by holders and written only by the drop, which the count
    // orders after every read (what the model checks).
    unsafe impl Sync for Watched {}
    impl Watched {
        fn read(&self) -> u64 {
            self.1.with(|v| unsafe { *v })
        }
    }
    impl Drop for Watched {
        fn drop(&mut self) {
            self.1.with_mut(|v| unsafe { *v = 0 });
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    impl Payload for Watched {
        const MESSAGE_TYPE_ID: TypeId = TypeId::of::<u64>();
        fn message_type(&self) -> MessageType {
            MessageType::of::<u64>()
        }
    }

    #[test]
    fn the_last_of_two_references_frees_the_node_once_after_the_other_s_last_use() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let a = NodePtr::new(Watched(drops.clone(), UnsafeCell::new(7)));
            let b = a.clone();
            let t = loom::thread::spawn(move || {
                assert_eq!(b.downcast::<Watched>().map(Watched::read), Some(7));
                drop(b);
            });
            assert_eq!(a.downcast::<Watched>().map(Watched::read), Some(7));
            drop(a);
            t.join().unwrap();
            assert_eq!(drops.load(Ordering::SeqCst), 1);
        });
    }
}
