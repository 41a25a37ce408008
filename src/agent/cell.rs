//! One allocation per agent: its shared core and its executor side by side, behind a thin
//! reference-counted pointer.
//!
//! The spawn-and-stop profile (callgrind, 20 000 one-agent coops) had each agent in three
//! allocations (core 264 bytes with its counts, executor 256, coop 136) and ~1 170 of its
//! ~4 750 instructions in `malloc` and `free`; the core and the executor are allocated
//! together here: a [`Block`] is an `Arc` whose value is the core (the header `H`), then
//! the executor (`E`, unsized to `dyn AgentExec` once built).
//!
//! # The pointers
//!
//! - [`ThinArc`] (the crate's `AgentArc`) is one word: a pointer to the block's
//!   [`Prefix`], which holds the block's own fat pointer (`me`, written once, right after
//!   allocation). Cloning and dropping one go through that fat pointer to the `Arc`'s
//!   counts, so `Arc`'s own rules keep the block alive and free it.
//! - [`ThinWeak`] is a `Weak` of the fat block (two words): it never reads the block
//!   through a thin pointer, so it needs the block neither alive nor initialized.
//! - [`ExecBox`] owns the executor as a `Box<dyn AgentExec>` did: exactly one exists while
//!   the executor is `OWNED` (the registering coop's, then its worker's); dropping it
//!   drops the executor in place (the memory goes with the block).
//!
//! # The executor's state
//!
//! `OWNED` (an `ExecBox` has it) → `WAITING` ([`ExecBox::hand_over`]: left in the block for
//! the worker's `Bind`) → `OWNED` again ([`ThinArc::take_over`], once: a compare-exchange)
//! → `DROPPED` (its `ExecBox` dropped, or the block dropped while it waited). Only the one
//! `ExecBox`, or the block's own drop (no other reference left), touches the executor.
//! Checked under miri by this module's tests.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};

use super::core::AgentExec;

/// An `ExecBox` owns the executor.
const OWNED: u8 = 0;
/// Handed over: the executor waits in the block for its worker.
const WAITING: u8 = 1;
/// Dropped: its agent finished, or it went with its coop or block unbound.
const DROPPED: u8 = 2;

/// What a thin pointer points to: the first field of every block, the same for every
/// executor type (`repr(C)`: its fields' offsets do not depend on the executor's).
#[repr(C)]
pub(crate) struct Prefix<H: Header> {
    head: H,
    /// The block itself, with the executor's vtable: the address (and provenance)
    /// `Arc::into_raw` gives for the block's `Arc`, taken from `Arc::as_ptr` while it was
    /// being built (`ThinArc::new` checks that the two are equal).
    me: SelfPtr<H>,
}

/// A block's header: it keeps the executor's state (a byte of its own padding, where the
/// prefix would have taken eight).
pub(crate) trait Header: Send + Sync + 'static {
    /// The executor's state: `OWNED` when the header is made.
    fn exec_state(&self) -> &AtomicU8;
}

/// The state a header starts with.
pub(crate) fn new_exec_state() -> AtomicU8 {
    AtomicU8::new(OWNED)
}

/// The allocation: a prefix, then the executor.
#[repr(C)]
pub(crate) struct Block<H: Header, E: ?Sized> {
    prefix: Prefix<H>,
    exec: UnsafeCell<ManuallyDrop<E>>,
}

/// A block, its executor's type erased.
type Fat<H> = Block<H, dyn AgentExec>;

struct SelfPtr<H: Header>(*const Fat<H>);

// SAFETY: the pointer is the block's own address: sending or sharing it is sending or
// sharing a reference to the block, which is as `Send`/`Sync` as the block is.
unsafe impl<H: Header> Send for SelfPtr<H> {}
// SAFETY: as above.
unsafe impl<H: Header> Sync for SelfPtr<H> {}

// SAFETY: the executor (the only field not `Sync` by itself) is reached only through its one
// `ExecBox` (`&mut` access on one thread at a time: `ExecBox` is not `Clone`, and moving it
// between threads needs `E: Send`), or by the block's drop (exclusive). Shared references
// to the block reach only the prefix.
unsafe impl<H: Header, E: ?Sized + Send> Sync for Block<H, E> {}

impl<H: Header, E: ?Sized> Drop for Block<H, E> {
    fn drop(&mut self) {
        let state = self.prefix.head.exec_state();
        // `Relaxed`: the drop of the last strong reference synchronized with every other.
        let state = state.load(Ordering::Relaxed);
        // `OWNED` cannot be: an `ExecBox` holds a strong reference.
        if state == WAITING {
            self.prefix
                .head
                .exec_state()
                .store(DROPPED, Ordering::Relaxed);
            // SAFETY: the executor is initialized (never dropped: not `DROPPED`), and no
            // `ExecBox` exists (it would hold a reference): this is the last access.
            unsafe { ManuallyDrop::drop(self.exec.get_mut()) };
        }
    }
}

/// A strong reference to an agent's block, one word; derefs to the header.
pub(crate) struct ThinArc<H: Header>(NonNull<Prefix<H>>);

// SAFETY: a `ThinArc` is an `Arc<Fat<H>>` in another form; `Fat<H>` is `Send + Sync` (see
// `Block`, with `dyn AgentExec: Send`).
unsafe impl<H: Header> Send for ThinArc<H> {}
// SAFETY: as above.
unsafe impl<H: Header> Sync for ThinArc<H> {}

impl<H: Header> ThinArc<H> {
    /// Allocates a block: `head`, then the executor `exec` makes from a weak reference to
    /// the block (the agent's context keeps one; `exec` must not upgrade it: the block is
    /// not built until this returns). Returns the block and its executor's owner.
    ///
    /// Neither rule is checked: `exec` (the executor's and the context's constructors)
    /// neither upgrades nor panics. An upgrade inside it would read only the written
    /// header (`take_over` then finds the executor owned, and the block's drop leaves it
    /// alone); a panic inside it would leak the header (its drop does not run).
    ///
    /// Built in place: `Arc::new_cyclic` built the whole block on the stack and copied
    /// it (~500 bytes, two `memcpy` calls, ~90 instructions per spawn, callgrind); here the
    /// header and then the executor are written into the allocation.
    pub(crate) fn new<E: AgentExec>(
        head: H,
        exec: impl FnOnce(ThinWeak<H>) -> E,
    ) -> (ThinArc<H>, ExecBox<H>) {
        let uninit: Arc<MaybeUninit<Block<H, E>>> = Arc::new_uninit();
        let raw: *mut Block<H, E> = Arc::as_ptr(&uninit).cast_mut().cast();
        let fat: *const Fat<H> = raw as *const Fat<H>;
        // SAFETY: `raw` is the allocation's value, not yet initialized and reachable by
        // nobody else (the one weak reference below is only stored before this returns);
        // the prefix is written whole, its `me` the block's own (final) address.
        unsafe {
            ptr::addr_of_mut!((*raw).prefix).write(Prefix {
                head,
                me: SelfPtr(fat),
            })
        };
        let weak = Weak::into_raw(Arc::downgrade(&uninit));
        // SAFETY: `MaybeUninit<Block<H, E>>` has the size, alignment and layout of
        // `Block<H, E>` (documented for `MaybeUninit`), so the allocation and its counts
        // are where a `Weak<Block<H, E>>` looks for them. `Weak::from_raw`'s docs name only
        // its own type's `into_raw`; `Arc::from_raw` documents this other-type case for the
        // same allocation, and the module's tests run it under miri (Stacked and Tree
        // Borrows). The weak reference is not upgraded before the block is initialized.
        let weak: Weak<Block<H, E>> = unsafe { Weak::from_raw(weak.cast::<Block<H, E>>()) };
        let weak: Weak<Fat<H>> = weak;
        let value = exec(ThinWeak(weak));
        // SAFETY: as above: the executor's field, written once; the weak reference `exec`
        // kept is not upgraded before this returns.
        unsafe { ptr::addr_of_mut!((*raw).exec).write(UnsafeCell::new(ManuallyDrop::new(value))) };
        // SAFETY: both fields are written: the block is initialized.
        let arc: Arc<Block<H, E>> = unsafe { uninit.assume_init() };
        let arc: Arc<Fat<H>> = arc;
        let thin = ThinArc::from_arc(arc);
        debug_assert!(ptr::addr_eq(thin.fat(), fat));
        let exec = ExecBox(thin.clone(), PhantomData);
        (thin, exec)
    }

    fn prefix(&self) -> &Prefix<H> {
        // SAFETY: this strong reference keeps the block, and so its prefix, alive.
        unsafe { self.0.as_ref() }
    }

    /// The block's fat pointer, as `Arc::into_raw` gave it.
    fn fat(&self) -> *const Fat<H> {
        self.prefix().me.0
    }

    /// The strong reference `Arc::into_raw` gave `arc` up as, made thin.
    fn from_arc(arc: Arc<Fat<H>>) -> Self {
        let raw = Arc::into_raw(arc).cast_mut();
        // SAFETY: not null (from an `Arc`); the prefix is the block's first field.
        ThinArc(unsafe { NonNull::new_unchecked(raw) }.cast::<Prefix<H>>())
    }

    /// A weak reference to the block.
    pub(crate) fn downgrade(&self) -> ThinWeak<H> {
        // SAFETY: `fat` is the block's `Arc::into_raw` pointer, with this strong reference
        // alive; the `Arc` made from it is never dropped (it is this reference).
        let arc = ManuallyDrop::new(unsafe { Arc::from_raw(self.fat()) });
        ThinWeak(Arc::downgrade(&arc))
    }

    /// Whether both refer to the same block.
    pub(crate) fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.0 == b.0
    }

    /// The executor the block's `Bind` is to take, once: `None` if it was not handed over
    /// or was taken already.
    pub(crate) fn take_over(&self) -> Option<ExecBox<H>> {
        self.exec_state()
            .compare_exchange(WAITING, OWNED, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| ExecBox(self.clone(), PhantomData))
    }
}

impl<H: Header> Clone for ThinArc<H> {
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: `fat` is the block's `Arc::into_raw` pointer, and this strong reference
        // keeps the count above zero.
        unsafe { Arc::increment_strong_count(self.fat()) };
        ThinArc(self.0)
    }
}

impl<H: Header> Drop for ThinArc<H> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `fat` is the block's `Arc::into_raw` pointer; this gives back the strong
        // reference this `ThinArc` held (read before it is given back).
        drop(unsafe { Arc::from_raw(self.fat()) });
    }
}

impl<H: Header> Deref for ThinArc<H> {
    type Target = H;

    #[inline]
    fn deref(&self) -> &H {
        &self.prefix().head
    }
}

/// A weak reference to an agent's block.
pub(crate) struct ThinWeak<H: Header>(Weak<Fat<H>>);

impl<H: Header> ThinWeak<H> {
    /// The block, if a strong reference is still alive.
    pub(crate) fn upgrade(&self) -> Option<ThinArc<H>> {
        self.0.upgrade().map(ThinArc::from_arc)
    }
}

impl<H: Header> Clone for ThinWeak<H> {
    fn clone(&self) -> Self {
        ThinWeak(self.0.clone())
    }
}

/// The owner of an agent's executor (as a `Box<dyn AgentExec>` was): the registering
/// coop's, then its worker's. Dropping it drops the executor; its memory goes with the
/// block.
///
/// Not `Sync` (as `Box<dyn AgentExec>` was not: `AgentExec` is only `Send`), though its
/// `ThinArc` is: `Deref` hands out the executor, which two threads must not use at once.
pub(crate) struct ExecBox<H: Header>(ThinArc<H>, PhantomData<std::cell::Cell<()>>);

impl<H: Header> ExecBox<H> {
    /// Leaves the executor in its block for the worker ([`ThinArc::take_over`]).
    pub(crate) fn hand_over(self) {
        let this = ManuallyDrop::new(self);
        this.0.exec_state().store(WAITING, Ordering::Release);
        // SAFETY: the strong reference is moved out of `this`, which is never used or
        // dropped again.
        drop(unsafe { ptr::read(&this.0) });
    }

    fn cell(&self) -> *mut ManuallyDrop<dyn AgentExec> {
        // SAFETY: the strong reference keeps the block alive; only the cell's address is
        // taken here.
        unsafe { (*self.0.fat()).exec.get() }
    }
}

impl<H: Header> Deref for ExecBox<H> {
    type Target = dyn AgentExec;

    #[inline]
    fn deref(&self) -> &(dyn AgentExec + 'static) {
        // SAFETY: this `ExecBox` is the executor's one owner (`OWNED`), so the executor is
        // initialized and nothing else reaches it while this borrow lasts.
        unsafe { &**self.cell() }
    }
}

impl<H: Header> DerefMut for ExecBox<H> {
    #[inline]
    fn deref_mut(&mut self) -> &mut (dyn AgentExec + 'static) {
        // SAFETY: as in `deref`, borrowed mutably through `&mut self`.
        unsafe { &mut **self.cell() }
    }
}

impl<H: Header> Drop for ExecBox<H> {
    fn drop(&mut self) {
        // Marked first: a panic in the executor's drop (the user's `Drop`) must not have
        // the block drop it again.
        self.0.exec_state().store(DROPPED, Ordering::Release);
        // SAFETY: the one owner drops the initialized executor, once (`DROPPED` now).
        unsafe { ManuallyDrop::drop(&mut *self.cell()) };
    }
}

impl<H: Header> fmt::Debug for ThinArc<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ThinArc({:p})", self.0)
    }
}

/// A value set at most once and read without a lock: `OnceLock` without its `Once`,
/// whose slow path, taken by every first set, cost an agent's two cells ~100 instructions
/// of a spawn and stop (callgrind). A second set, or one racing the first, gets its value
/// back. Its protocol has a loom model (`cell::loom_tests`).
pub(crate) struct SetOnce<T> {
    state: OnceState,
    value: UnsafeOnceValue<MaybeUninit<T>>,
}

#[cfg(not(loom))]
use std::sync::atomic::AtomicU8 as OnceState;

#[cfg(loom)]
use loom::sync::atomic::AtomicU8 as OnceState;

#[cfg(not(loom))]
use self::std_cell::UnsafeCell as UnsafeOnceValue;

#[cfg(loom)]
use loom::cell::UnsafeCell as UnsafeOnceValue;

/// `std`'s `UnsafeCell` with loom's access API, so that one body serves both builds.
#[cfg(not(loom))]
mod std_cell {
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

/// `SetOnce::state`: nothing yet; being written (by the one setter that won the state);
/// written.
const UNSET: u8 = 0;
const WRITING: u8 = 1;
const SET: u8 = 2;

// SAFETY: the value is written once, by the one setter that moved the state from `UNSET`,
// before `SET` is published (`Release`), and only read after `SET` is seen (`Acquire`):
// shared access is to `&T`, and the value moves in from the setter's thread.
unsafe impl<T: Send + Sync> Sync for SetOnce<T> {}

impl<T> SetOnce<T> {
    pub(crate) fn new() -> Self {
        SetOnce {
            state: OnceState::new(UNSET),
            value: UnsafeOnceValue::new(MaybeUninit::uninit()),
        }
    }

    /// The value, once set.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        if self.state.load(Ordering::Acquire) == SET {
            // SAFETY: `SET` is published after the value was written, and the value is
            // never written again while `&self` lives.
            Some(self.value.with(|v| unsafe { (*v).assume_init_ref() }))
        } else {
            None
        }
    }

    /// Sets the value, unless it is set (or being set) already: then it comes back.
    pub(crate) fn set(&self, value: T) -> Result<(), T> {
        if self
            .state
            .compare_exchange(UNSET, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(value);
        }
        // SAFETY: this call moved the state from `UNSET`, so it alone writes, and nobody
        // reads the value before `SET`.
        self.value.with_mut(|v| unsafe { (*v).write(value) });
        self.state.store(SET, Ordering::Release);
        Ok(())
    }
}

impl<T> Drop for SetOnce<T> {
    fn drop(&mut self) {
        // `Relaxed`: `&mut self` is exclusive, ordered after every other access.
        if self.state.load(Ordering::Relaxed) == SET {
            // SAFETY: set, so initialized; dropped once, here.
            self.value.with_mut(|v| unsafe { (*v).assume_init_drop() });
        }
    }
}

#[cfg(all(test, not(loom)))]
#[path = "cell_tests.rs"]
mod tests;

#[cfg(all(test, loom))]
#[path = "cell_loom_tests.rs"]
mod loom_tests;
