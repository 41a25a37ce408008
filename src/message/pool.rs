//! A per-thread cache of freed node blocks, by size class: the allocation of a mutable
//! message's node.
//!
//! A mutable message goes to one receiver, which takes its value and drops the node where
//! it ran. When sender and receiver share a worker (the YDB layer: every event is a
//! `Mutable<Delivery>` to its mailbox, and most sends are between actors of one pool), the
//! nodes the receiver frees are the ones the sender needs next. The allocator's own
//! per-thread cache keeps 7 blocks per size, so a burst of more than 7 events in flight
//! (an actor sending 1 000 events before its receiver runs) went to the allocator's slow
//! path twice per event: ~200 instructions for the `malloc` and ~200 for the `free` of
//! each of `ydb_send_by_id`'s events (callgrind). Here a freed block goes on its thread's
//! list for its class (a push) and the next node of the class takes it (a pop), up to
//! [`BUDGET`] bytes per thread; beyond that, and on a thread that is going away, blocks
//! go to and come from the global allocator.
//!
//! A block of class `c` is always allocated with the layout `(16 * (c + 1), 16)`, whoever
//! allocated it and wherever it is freed, so a block may move between threads (freed on
//! the receiver's, cached there, handed to that thread's next sender) and is returned to
//! the global allocator with the layout it was allocated with. A thread's cached blocks are
//! returned when the thread ends.
//!
//! The module's tests run under miri (`cargo +nightly miri test --lib message::`).

#![allow(unsafe_code)]

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::Cell;
use std::ptr::NonNull;

/// Size classes are this many bytes apart, and blocks are aligned to it.
const GRANULE: usize = 16;
/// Classes: blocks of 16, 32, ... 256 bytes.
const CLASSES: usize = 16;
/// Largest block a class holds.
pub(super) const MAX_POOLED_SIZE: usize = GRANULE * CLASSES;
/// Bytes of blocks a thread keeps at most (all classes together): about 1 600 nodes of a
/// YDB event's delivery (~150 bytes).
const BUDGET: usize = 256 * 1024;

/// The class of blocks that hold a value of `layout`, if it is small enough to be pooled.
pub(super) const fn class_of(layout: Layout) -> Option<usize> {
    if layout.size() == 0 || layout.size() > MAX_POOLED_SIZE || layout.align() > GRANULE {
        return None;
    }
    Some((layout.size() - 1) / GRANULE)
}

/// The layout of every block of class `class`.
#[inline]
fn block_layout(class: usize) -> Layout {
    debug_assert!(class < CLASSES);
    // Never fails: a multiple of 16 up to 256, aligned to 16.
    match Layout::from_size_align((class + 1) * GRANULE, GRANULE) {
        Ok(l) => l,
        Err(_) => unreachable!("a size class's layout is valid"),
    }
}

/// A cached block: its first word links to the next one of its class.
struct Free {
    next: *mut Free,
}

/// One thread's cached blocks.
struct Cache {
    heads: [Cell<*mut Free>; CLASSES],
    bytes: Cell<usize>,
}

impl Cache {
    #[inline]
    fn pop(&self, class: usize) -> Option<NonNull<u8>> {
        let head = self.heads[class].get();
        let block = NonNull::new(head)?;
        // SAFETY: a block on this list was pushed by `push`, which wrote its link; the
        // thread owns it until it is popped (only this thread reaches its cache).
        self.heads[class].set(unsafe { (*head).next });
        self.bytes
            .set(self.bytes.get() - block_layout(class).size());
        Some(block.cast())
    }

    /// Keeps `block` if the budget allows; `false` leaves it to the caller.
    ///
    /// # Safety
    /// `block` was allocated with `block_layout(class)` and nothing refers to it any more.
    #[inline]
    unsafe fn push(&self, class: usize, block: NonNull<u8>) -> bool {
        let size = block_layout(class).size();
        let bytes = self.bytes.get() + size;
        if bytes > BUDGET {
            return false;
        }
        let block = block.cast::<Free>().as_ptr();
        // SAFETY: the block is at least 16 bytes, aligned to 16, and unused (the caller's
        // promise): room for the link.
        unsafe {
            block.write(Free {
                next: self.heads[class].get(),
            })
        };
        self.heads[class].set(block);
        self.bytes.set(bytes);
        true
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        for class in 0..CLASSES {
            while let Some(block) = self.pop(class) {
                // SAFETY: a cached block, allocated with its class's layout, unused.
                unsafe { dealloc(block.as_ptr(), block_layout(class)) };
            }
        }
    }
}

thread_local! {
    static CACHE: Cache = const {
        Cache {
            heads: [const { Cell::new(std::ptr::null_mut()) }; CLASSES],
            bytes: Cell::new(0),
        }
    };
}

/// A block of class `class` (uninitialised): the thread's last freed one, or a new one.
#[inline]
pub(super) fn alloc_block(class: usize) -> NonNull<u8> {
    if let Ok(Some(block)) = CACHE.try_with(|c| c.pop(class)) {
        return block;
    }
    new_block(class)
}

#[inline(never)]
fn new_block(class: usize) -> NonNull<u8> {
    let layout = block_layout(class);
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc(layout) };
    match NonNull::new(p) {
        Some(p) => p,
        None => handle_alloc_error(layout),
    }
}

/// Gives back a block of class `class`: kept for this thread's next one if the budget
/// allows, else returned to the global allocator.
///
/// # Safety
/// `block` came from [`alloc_block`]`(class)` (on any thread), whatever it held was dropped,
/// and nothing refers to it any more.
#[inline]
pub(super) unsafe fn free_block(class: usize, block: NonNull<u8>) {
    // SAFETY: the caller's promise.
    if let Ok(true) = CACHE.try_with(|c| unsafe { c.push(class, block) }) {
        return;
    }
    // SAFETY: allocated with this layout (every block of the class is), unused.
    unsafe { dealloc(block.as_ptr(), block_layout(class)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_small_layouts_only() {
        assert_eq!(class_of(Layout::new::<u8>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u8; 16]>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u8; 17]>()), Some(1));
        assert_eq!(class_of(Layout::new::<[u8; 256]>()), Some(15));
        assert_eq!(class_of(Layout::new::<[u8; 257]>()), None);
        assert_eq!(class_of(Layout::new::<()>()), None);
        #[repr(align(32))]
        struct Wide(#[allow(dead_code)] u8);
        assert_eq!(class_of(Layout::new::<Wide>()), None);
    }

    #[test]
    fn a_freed_block_is_reused_by_its_class_on_its_thread_and_the_budget_holds() {
        let a = alloc_block(3);
        // SAFETY: from alloc_block(3), holding nothing.
        unsafe { free_block(3, a) };
        let b = alloc_block(3);
        assert_eq!(a, b, "the cached block");
        let c = alloc_block(2);
        assert_ne!(c, b);
        // Blocks freed on another thread: cached there, returned when it ends.
        struct Handed(NonNull<u8>, NonNull<u8>);
        // SAFETY: two unused blocks, handed over whole.
        unsafe impl Send for Handed {}
        let moved = Handed(b, c);
        std::thread::spawn(move || {
            let moved = moved;
            // SAFETY: blocks of these classes, handed over, holding nothing.
            unsafe {
                free_block(3, moved.0);
                free_block(2, moved.1);
            }
        })
        .join()
        .unwrap();
        // Over the budget: the rest go back to the allocator (miri checks every one is freed
        // once, with its layout).
        let blocks: Vec<_> = (0..BUDGET / 256 + 8).map(|_| alloc_block(15)).collect();
        for b in blocks {
            // SAFETY: from alloc_block(15), holding nothing.
            unsafe { free_block(15, b) };
        }
        CACHE.with(|c| assert!(c.bytes.get() <= BUDGET));
    }
}
