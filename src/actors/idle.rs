//! A pool's idle mailboxes: mailbox agents whose actors all passed away, kept registered
//! for the next actor of the same type (YDB's pool of free mailboxes).
//!
//! | step | who | what |
//! |---|---|---|
//! | park | the mailbox, when its last actor left | joins its type's list, unless the pool keeps [`PoolConfig::idle_mailboxes`](super::PoolConfig::idle_mailboxes) already or the system stops: then it deregisters |
//! | take | `register` of an actor of that type | the last parked mailbox leaves the list; the actor's cell goes into the mailbox's [`Dock`], and a signal (`HostSignal`, no allocation) to its queue |
//! | adopt | the mailbox, on the signal | takes the cell from the slot, bootstraps the actor |
//! | remove | a parked mailbox whose coop ends (environment stop) | leaves the list |
//! | close | `ActorSystem::stop` | every parked mailbox leaves the list and is asked to deregister; no later one parks |
//!
//! The dock is allocated once per mailbox, so that giving it an actor allocates nothing but
//! the signal's message (callgrind, `ydb_register`: the cell boxed in the signal cost two
//! allocations and their frees on the other thread, ~650 instructions per actor).
//!
//! A mailbox is typed by the actor it hosts inline (`MailboxAgent<A>`), so the lists are
//! by actor type. A parked mailbox's coop counts as idle for the environment
//! (`Environment::idle_coops_changed`): it does not hold the autoshutdown.
//!
//! A mailbox that ends closes its dock ([`Dock::close`]): a cell put there just before
//! (its `take` raced the end) is taken back out and its actor's id leaves the table; a
//! later `put` fails and the registration makes a mailbox of its own instead.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::mbox::Mbox;

/// Hashes a `TypeId` (already a hash): keeps its 64 bits.
#[derive(Default)]
struct TypeIdHasher(u64);

impl Hasher for TypeIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

/// A mailbox's side of parking (one allocation per mailbox, made in its `define`): its
/// direct mbox and the slot where `register` leaves its next actor's cell. Its pool's idle
/// list holds it (one reference count) while the mailbox is parked.
pub(crate) struct Dock<C> {
    mbox: Mbox,
    slot: Mutex<(Option<C>, bool)>,
}

impl<C> Dock<C> {
    /// The mailbox's direct mbox.
    pub(crate) fn mbox(&self) -> &Mbox {
        &self.mbox
    }

    pub(crate) fn new(mbox: Mbox) -> Self {
        Dock {
            mbox,
            slot: Mutex::new((None, false)),
        }
    }

    /// Leaves `cell` for the mailbox; gives it back if the mailbox has ended.
    pub(crate) fn put(&self, cell: C) -> Result<(), C> {
        let mut s = self.slot.lock();
        if s.1 {
            return Err(cell);
        }
        s.0 = Some(cell);
        Ok(())
    }

    /// The cell left for the mailbox, if any.
    pub(crate) fn take(&self) -> Option<C> {
        self.slot.lock().0.take()
    }

    /// The mailbox ends: no cell is left from now on; returns one left and not taken.
    pub(crate) fn close(&self) -> Option<C> {
        let mut s = self.slot.lock();
        s.1 = true;
        s.0.take()
    }
}

/// A parked mailbox as its pool's list holds it: a [`Dock`] of its cell type.
pub(crate) trait Docked: Send + Sync {
    /// The mailbox's direct mbox.
    fn mbox(&self) -> &Mbox;
    /// For `register` to reach the [`Dock`] of its actor's cell type.
    fn as_any(&self) -> &dyn Any;
}

impl<C: Send + 'static> Docked for Dock<C> {
    fn mbox(&self) -> &Mbox {
        &self.mbox
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A parked mailbox.
pub(crate) type Parked = Arc<dyn Docked>;

#[derive(Default)]
struct Lists {
    by_type: HashMap<TypeId, Vec<Parked>, BuildHasherDefault<TypeIdHasher>>,
    count: usize,
    closed: bool,
}

/// One pool's idle mailboxes, at most `cap` in all.
pub(crate) struct IdleMailboxes {
    lists: Mutex<Lists>,
    cap: usize,
}

impl IdleMailboxes {
    pub(crate) fn new(cap: usize) -> Self {
        IdleMailboxes {
            lists: Mutex::new(Lists::default()),
            cap,
        }
    }

    /// A parked mailbox for an actor of type `ty`, taken off the list.
    #[inline]
    pub(crate) fn take(&self, ty: TypeId) -> Option<Parked> {
        if self.cap == 0 {
            return None;
        }
        let mut l = self.lists.lock();
        let m = l.by_type.get_mut(&ty)?.pop()?;
        l.count -= 1;
        Some(m)
    }

    /// Parks a mailbox for actors of type `ty`; false when the pool keeps its maximum
    /// already or the lists are closed: the mailbox deregisters instead.
    pub(crate) fn park(&self, ty: TypeId, dock: &Parked) -> bool {
        let mut l = self.lists.lock();
        if l.closed || l.count >= self.cap {
            return false;
        }
        l.count += 1;
        let parked = dock.clone();
        match l.by_type.get_mut(&ty) {
            Some(list) => list.push(parked),
            None => {
                l.by_type.insert(ty, vec![parked]);
            }
        }
        true
    }

    /// Takes `dock` off the list; whether it was there (a `take` may have been first).
    pub(crate) fn remove(&self, ty: TypeId, dock: &Parked) -> bool {
        let mut l = self.lists.lock();
        let Some(list) = l.by_type.get_mut(&ty) else {
            return false;
        };
        let me = Arc::as_ptr(dock);
        let Some(i) = list
            .iter()
            .position(|m| std::ptr::addr_eq(Arc::as_ptr(m), me))
        else {
            return false;
        };
        let gone = list.swap_remove(i);
        l.count -= 1;
        drop(l);
        drop(gone);
        true
    }

    /// Closes the lists: no mailbox parks from now on; returns those parked.
    pub(crate) fn close(&self) -> Vec<Parked> {
        let mut l = self.lists.lock();
        l.closed = true;
        l.count = 0;
        l.by_type.drain().flat_map(|(_, v)| v).collect()
    }

    /// Mailboxes parked now.
    pub(crate) fn len(&self) -> usize {
        self.lists.lock().count
    }
}

#[cfg(test)]
#[path = "idle_tests.rs"]
mod tests;
