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
mod tests {
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::time::Duration;

    use crate::actors::delivery::Delivery;
    use crate::actors::*;
    use crate::{ActorId, WrappedEnv};

    struct Probe(u32);
    impl Event for Probe {
        const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 911;
    }

    /// `(who, probe number)` for a probe, `(who, cookie + 1000)` for an `Undelivered`.
    struct Recorder(Sender<(ActorId, u64)>);
    impl Actor for Recorder {
        fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
            ctx.become_state(Self::on);
        }
    }
    impl Recorder {
        fn on(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
            if let Some(p) = ev.get::<Probe>() {
                let _ = self.0.send((ctx.self_id(), u64::from(p.0)));
            } else if ev.is::<Undelivered>() {
                let _ = self.0.send((ctx.self_id(), ev.cookie() + 1000));
            } else {
                return ev.unhandled(); // Poison: passes away
            }
            Handled::Yes
        }
    }

    fn next(rx: &Receiver<(ActorId, u64)>) -> (ActorId, u64) {
        rx.recv_timeout(Duration::from_secs(60)).expect("an event")
    }

    /// An event that reaches a recycled mailbox for the actor that left it (through a
    /// route resolved before it passed away) is not delivered, with the non-delivery
    /// treatment, and never reaches the mailbox's next actor.
    #[test]
    fn an_event_for_the_actor_that_left_a_recycled_mailbox_never_reaches_its_next_actor() {
        crate::test_support::within_patience(stale_event_in_a_recycled_mailbox);
    }

    fn stale_event_in_a_recycled_mailbox() {
        let w = WrappedEnv::new(|_| {}).unwrap();
        let sys = ActorSystem::start(w.environment(), SystemSetup::new(1)).unwrap();
        let (tx, rx) = channel();
        let watcher = sys.register(Recorder(tx.clone())).unwrap();
        let old = sys.register(Recorder(tx.clone())).unwrap();
        let pool = sys.0.pool(0);
        let (stale_route, _) = pool.table.resolve(old.hint(), old.local_id()).unwrap();
        sys.send(old, Poison);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while pool.idle.len() == 0 {
            assert!(std::time::Instant::now() < deadline, "the mailbox parks");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!sys.is_registered(old), "its id stopped resolving");
        let new = sys.register(Recorder(tx)).unwrap();
        let (route, _) = pool.table.resolve(new.hint(), new.local_id()).unwrap();
        assert_eq!(
            route.id(),
            stale_route.id(),
            "the next actor is in the same mailbox"
        );
        assert_eq!(pool.idle.len(), 0);
        // Queued in the mailbox after its next actor, as a sender that resolved the old
        // id just before it passed away would.
        let stale = EventHandle::new(old, watcher, Probe(1))
            .with_flags(EventFlags::TRACK_DELIVERY)
            .with_cookie(7);
        stale_route
            .send_mutable(Delivery::new(stale, sys.0.link, None, false))
            .unwrap();
        sys.send(new, Probe(2));
        let mut got = vec![next(&rx), next(&rx)];
        got.sort();
        let mut want = vec![(new, 2), (watcher, 1007)];
        want.sort();
        assert_eq!(got, want, "the next actor got only its own event");
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        assert_eq!(sys.stats().undelivered, 1);
        w.stop_then_join().unwrap();
    }
}
