//! The environment's registry of coops: every coop from its linking (registration step 3)
//! until it is final.
//!
//! A slab: each coop keeps its slot, so linking and unlinking touch one entry and never
//! hash (with a hash map, 100 000 one-agent coops coming and going spent an eighth of the
//! spawn and stop benchmark there). Only used under the environment's state lock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// An entry of the registry (a coop): it keeps the number of its slot.
pub(crate) trait Slotted {
    /// Where the registry keeps the entry's slot (`u32::MAX` while it has none).
    fn registry_slot(&self) -> &AtomicU32;
}

pub(crate) struct Registry<C> {
    slots: Vec<Option<Arc<C>>>,
    free: Vec<usize>,
    len: usize,
}

impl<C> Default for Registry<C> {
    fn default() -> Self {
        Registry {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<C: Slotted> Registry<C> {
    pub(crate) fn insert(&mut self, coop: &Arc<C>) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        // A slot past `u32::MAX` cannot happen (see `registry_slot`); were it to, the
        // coop would keep the entry's `u32::MAX`, never found by `remove`, not a wrong slot.
        coop.registry_slot()
            .store(u32::try_from(slot).unwrap_or(u32::MAX), Ordering::Relaxed);
        self.slots[slot] = Some(coop.clone());
        self.len += 1;
    }

    pub(crate) fn remove(&mut self, coop: &C) {
        let slot = coop.registry_slot().load(Ordering::Relaxed) as usize;
        match self.slots.get_mut(slot) {
            Some(entry)
                if entry
                    .as_ref()
                    .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), coop)) =>
            {
                *entry = None;
                self.free.push(slot);
                self.len -= 1;
                if self.len == 0 {
                    // Gives back the memory of a past crowd.
                    *self = Registry::default();
                }
            }
            _ => {}
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn coops(&self) -> impl Iterator<Item = &Arc<C>> {
        self.slots.iter().flatten()
    }
}
