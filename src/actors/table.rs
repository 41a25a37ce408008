//! The actor table of one pool: a slab indexed by the hint, the local id as generation.
//!
//! | slot field | meaning |
//! |---|---|
//! | `local_id` | the actor living in the slot; 0 when the slot is free (local ids start at 1) |
//! | `mbox` | its mailbox (the direct mbox of the agent hosting it); `None` while reserved |
//! | `alive` | cleared when the actor leaves: senders that cached the route check it; made on the first `resolve` (most actors are never cached: one allocation less per registration) |
//!
//! A lookup is one index and one compare: `slots[hint]`, then `local_id ==`; no hashing.
//! A freed hint goes to the free list and is reused by a later actor, with a new local id
//! (local ids are never reused), so a stale id fails the compare and never reaches the new
//! actor.
//!
//! Races: lookups take the read lock (recursive: a delivery made under it may drop an
//! event whose non-delivery looks up again on the same thread), changes the write lock. An
//! actor removed while a sender holds its mbox still gets that event queued; the mailbox
//! then treats it as not delivered (see `mailbox.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard};

use crate::mbox::Mbox;

struct Slot {
    local_id: u64,
    mbox: Option<Mbox>,
    /// Made by the first [`ActorTable::resolve`] of the actor, under the read lock.
    alive: OnceLock<Arc<AtomicBool>>,
}

#[derive(Default)]
struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

/// One pool's actors by hint.
#[derive(Default)]
pub(crate) struct ActorTable {
    slab: RwLock<Slab>,
}

impl ActorTable {
    /// Reserves a slot for `local_id`; it resolves to nothing until [`fill`](Self::fill).
    /// `None` when the hints (u32) are exhausted.
    /// With `mbox`, the slot resolves to it at once (no [`fill`](Self::fill) needed).
    pub(crate) fn reserve_with(&self, local_id: u64, mbox: Option<Mbox>) -> Option<u32> {
        let mut s = self.slab.write();
        s.live += 1;
        let slot = Slot {
            local_id,
            mbox,
            alive: OnceLock::new(),
        };
        if let Some(hint) = s.free.pop() {
            s.slots[hint as usize] = slot;
            return Some(hint);
        }
        let hint = u32::try_from(s.slots.len()).ok()?;
        s.slots.push(slot);
        Some(hint)
    }

    /// Makes a reserved slot resolve to `mbox`.
    pub(crate) fn fill(&self, hint: u32, local_id: u64, mbox: Mbox) {
        let mut s = self.slab.write();
        if let Some(slot) = s.slots.get_mut(hint as usize) {
            if slot.local_id == local_id {
                slot.mbox = Some(mbox);
            }
        }
    }

    /// Frees the slot of `(hint, local_id)`; false if it holds another actor (or none).
    pub(crate) fn remove(&self, hint: u32, local_id: u64) -> bool {
        let mut s = self.slab.write();
        match s.slots.get_mut(hint as usize) {
            Some(slot) if slot.local_id == local_id && local_id != 0 => {
                if let Some(alive) = slot.alive.get() {
                    alive.store(false, Ordering::Release);
                }
                slot.local_id = 0;
                let mbox = slot.mbox.take();
                s.free.push(hint);
                s.live -= 1;
                drop(s);
                drop(mbox);
                true
            }
            _ => false,
        }
    }

    /// Runs `f` with the mailbox of `(hint, local_id)`, under the read lock.
    #[inline]
    pub(crate) fn with<R>(
        &self,
        hint: u32,
        local_id: u64,
        f: impl FnOnce(&Mbox) -> R,
    ) -> Option<R> {
        let s = self.slab.read_recursive();
        match s.slots.get(hint as usize) {
            Some(Slot {
                local_id: l,
                mbox: Some(m),
                ..
            }) if *l == local_id => Some(f(m)),
            _ => None,
        }
    }

    /// The mailbox of `(hint, local_id)`, borrowed under the read lock (held until the
    /// guard is dropped). The send path uses it with the handle it already holds: passed
    /// into a closure with the handle (`with`-style), the handle was copied once more per
    /// send, and once again for the `Result` that gave it back on a miss (callgrind,
    /// `ydb_send_by_id`: 137 -> 113 instructions in the routing).
    #[inline]
    pub(crate) fn get(&self, hint: u32, local_id: u64) -> Option<MappedRwLockReadGuard<'_, Mbox>> {
        RwLockReadGuard::try_map(self.slab.read_recursive(), |s| {
            match s.slots.get(hint as usize) {
                Some(Slot {
                    local_id: l,
                    mbox: Some(m),
                    ..
                }) if *l == local_id => Some(m),
                _ => None,
            }
        })
        .ok()
    }

    /// The mailbox of `(hint, local_id)` and the actor's liveness flag, to cache.
    pub(crate) fn resolve(&self, hint: u32, local_id: u64) -> Option<(Mbox, Arc<AtomicBool>)> {
        let s = self.slab.read_recursive();
        match s.slots.get(hint as usize) {
            Some(Slot {
                local_id: l,
                mbox: Some(m),
                alive,
            }) if *l == local_id => Some((
                m.clone(),
                alive
                    .get_or_init(|| Arc::new(AtomicBool::new(true)))
                    .clone(),
            )),
            _ => None,
        }
    }

    /// The distinct mailboxes of the live actors.
    pub(crate) fn mailboxes(&self) -> Vec<Mbox> {
        let s = self.slab.read_recursive();
        let mut out: Vec<Mbox> = s.slots.iter().filter_map(|x| x.mbox.clone()).collect();
        out.sort_by_key(|m| m.id());
        out.dedup_by_key(|m| m.id());
        out
    }

    /// Actors in the table (reserved slots included).
    pub(crate) fn live(&self) -> usize {
        self.slab.read_recursive().live
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::ActorTable;

    /// A route learnt by `resolve` goes stale when its actor leaves, and the slot's next
    /// actor (same hint, new local id) is not reached through it; the flag is made only for
    /// actors that are resolved.
    #[test]
    fn a_resolved_route_goes_stale_when_its_actor_leaves_and_never_reaches_the_next() {
        crate::test_support::within_patience(|| {
            crate::Environment::launch(|env| {
                let table = ActorTable::default();
                let hint = table.reserve_with(1, None).unwrap();
                table.fill(hint, 1, env.create_mbox());
                let (_, alive) = table.resolve(hint, 1).expect("registered");
                let (_, again) = table.resolve(hint, 1).expect("registered");
                assert!(std::sync::Arc::ptr_eq(&alive, &again), "one flag per actor");
                assert!(alive.load(Ordering::Acquire));
                assert!(table.remove(hint, 1));
                assert!(!alive.load(Ordering::Acquire), "stale once it left");
                assert_eq!(
                    table.reserve_with(2, None),
                    Some(hint),
                    "the hint is reused"
                );
                table.fill(hint, 2, env.create_mbox());
                assert!(table.resolve(hint, 1).is_none(), "the old id misses");
                let (_, next) = table.resolve(hint, 2).expect("the next actor");
                assert!(next.load(Ordering::Acquire));
                assert!(!alive.load(Ordering::Acquire));
                // Never resolved: removed without a flag to clear.
                let other = table.reserve_with(3, None).unwrap();
                assert!(table.remove(other, 3));
                assert_eq!(table.live(), 1);
            })
            .unwrap();
        });
    }
}
