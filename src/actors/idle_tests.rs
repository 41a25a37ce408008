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
