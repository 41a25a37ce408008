//! The environment's registry of coops: every coop from its linking (registration step 3)
//! until it is final.
//!
//! A slab: each coop keeps its slot, so linking and unlinking touch one entry and never
//! hash (with a hash map, 100 000 one-agent coops coming and going spent an eighth of the
//! spawn and stop benchmark there). Only used under the environment's state lock.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::coop::CoopInner;

#[derive(Default)]
pub(crate) struct Registry {
    slots: Vec<Option<Arc<CoopInner>>>,
    free: Vec<usize>,
    len: usize,
}

impl Registry {
    pub(crate) fn insert(&mut self, coop: &Arc<CoopInner>) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        // A slot past `u32::MAX` cannot happen (see `registry_slot`); were it to, the
        // coop would keep the entry's `u32::MAX`, never found by `remove`, not a wrong slot.
        coop.registry_slot
            .store(u32::try_from(slot).unwrap_or(u32::MAX), Ordering::Relaxed);
        self.slots[slot] = Some(coop.clone());
        self.len += 1;
    }

    pub(crate) fn remove(&mut self, coop: &CoopInner) {
        let slot = coop.registry_slot.load(Ordering::Relaxed) as usize;
        match self.slots.get_mut(slot) {
            Some(entry) if entry.as_ref().is_some_and(|c| c.id == coop.id) => {
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

    pub(crate) fn coops(&self) -> impl Iterator<Item = &Arc<CoopInner>> {
        self.slots.iter().flatten()
    }
}
