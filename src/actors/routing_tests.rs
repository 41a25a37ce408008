use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use crate::actors::*;
use crate::{ActorId, WrappedEnv};

struct Probe(u32);
impl Event for Probe {
    const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 901;
}

/// What a recorder got: a probe's number, or an `Undelivered`'s `unsure`.
#[derive(Debug, PartialEq)]
enum Got {
    Probe(u32),
    Undelivered { unsure: bool },
}

struct Recorder(Sender<Got>);
impl Actor for Recorder {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::on);
    }
}
impl Recorder {
    fn on(&mut self, _: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        if let Some(p) = ev.get::<Probe>() {
            let _ = self.0.send(Got::Probe(p.0));
        } else if let Some(u) = ev.get::<Undelivered>() {
            let _ = self.0.send(Got::Undelivered { unsure: u.unsure });
        } else {
            return ev.unhandled();
        }
        Handled::Yes
    }
}

fn next(rx: &Receiver<Got>) -> Got {
    rx.recv_timeout(Duration::from_secs(60)).expect("an event")
}

#[test]
fn an_unsure_loss_is_forwarded_or_notified_only_with_generate_unsure_undelivered() {
    // Bounded: the environment's stop would hang, not fail, if a worker's broke.
    crate::test_support::within_patience(unsure_losses);
}

fn unsure_losses() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let sys = ActorSystem::start(w.environment(), SystemSetup::new(1)).unwrap();
    let (to_sender, at_sender) = channel();
    let (to_target, at_target) = channel();
    let sender = sys.register(Recorder(to_sender)).unwrap();
    let target = sys.register(Recorder(to_target)).unwrap();
    let lost = ActorId::new(2, 5, 0);
    let track = EventFlags::TRACK_DELIVERY;
    let unsure = track | EventFlags::GENERATE_UNSURE_UNDELIVERED;
    let lose = |n: u32, flags: EventFlags, forward: bool| {
        let h = EventHandle::new(lost, sender, Probe(n)).with_flags(flags);
        let h = if forward {
            h.forward_on_nondelivery(target)
        } else {
            h
        };
        sys.0
            .not_delivered_as(h, DeadLetterReason::Disconnected, true);
    };
    // It may have been delivered and did not ask: neither forwarded nor notified.
    lose(1, track, true);
    lose(2, track, false);
    // It asked: forwarded (3), or notified as unsure (4).
    lose(3, unsure, true);
    lose(4, unsure, false);
    // The target's first event is probe 3 (probe 1, sent before it, did not come).
    assert_eq!(next(&at_target), Got::Probe(3));
    assert_eq!(next(&at_sender), Got::Undelivered { unsure: true });
    let stats = sys.stats();
    assert_eq!(
        (stats.dead_letters, stats.forwarded, stats.undelivered),
        (3, 1, 1)
    );
    w.stop_then_join().unwrap();
}

/// Schedules wake-up 1, waits (blocking its worker) until the timer has fired it into
/// the queue, cancels it, then schedules wake-up 2: only 2 is handled.
struct Canceller(Sender<u64>);
impl Actor for Canceller {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::on);
        let first = ctx.schedule(Duration::from_millis(1), Wakeup { tag: 1 });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while first.is_active() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        first.cancel();
        ctx.schedule(Duration::from_millis(1), Wakeup { tag: 2 });
    }
}
impl Canceller {
    fn on(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let Some(w) = ev.get::<Wakeup>() else {
            return ev.unhandled();
        };
        let _ = self.0.send(w.tag);
        let _ = ctx.pass_away();
        Handled::Yes
    }
}

#[test]
fn a_scheduled_event_cancelled_while_queued_is_not_handled_nor_a_dead_letter() {
    crate::test_support::within_patience(|| {
        let w = WrappedEnv::new(|_| {}).unwrap();
        let sys = ActorSystem::start(w.environment(), SystemSetup::new(1)).unwrap();
        let (tx, rx) = channel();
        sys.register(Canceller(tx)).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(45)), Ok(2));
        assert_eq!(sys.stats().dead_letters, 0);
        w.stop_then_join().unwrap();
    });
}

/// Records probes like a [`Recorder`], and passes away after probe `last`.
struct Quitter(Sender<Got>, u32);
impl Actor for Quitter {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::on);
    }
}
impl Quitter {
    fn on(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let Some(p) = ev.get::<Probe>() else {
            return ev.unhandled();
        };
        let _ = self.0.send(Got::Probe(p.0));
        if p.0 == self.1 {
            let _ = ctx.pass_away();
        }
        Handled::Yes
    }
}

#[test]
fn a_batch_keeps_each_recipient_s_order_and_what_follows_a_pass_away_is_undelivered() {
    crate::test_support::within_patience(batches);
}

fn batches() {
    let w = WrappedEnv::new(|_| {}).unwrap();
    let sys = ActorSystem::start(w.environment(), SystemSetup::new(1)).unwrap();
    let (to_sender, at_sender) = channel();
    let (to_a, at_a) = channel();
    let (to_b, at_b) = channel();
    let sender = sys.register(Recorder(to_sender)).unwrap();
    let a = sys.register(Quitter(to_a, 4)).unwrap();
    let b = sys.register(Recorder(to_b)).unwrap();
    let probe = |to: ActorId, n: u32| {
        EventHandle::new(to, sender, Probe(n)).with_flags(EventFlags::TRACK_DELIVERY)
    };
    // Runs for a (1-2, 4-6: a passes away after 4), single events for b.
    let mut batch = vec![
        probe(a, 1),
        probe(a, 2),
        probe(b, 3),
        probe(a, 4),
        probe(a, 5),
        probe(a, 6),
        probe(b, 7),
    ];
    sys.0.send_batch(&mut batch);
    assert!(batch.is_empty());
    for n in [1, 2, 4] {
        assert_eq!(next(&at_a), Got::Probe(n));
    }
    for n in [3, 7] {
        assert_eq!(next(&at_b), Got::Probe(n));
    }
    // 5 and 6 came after a passed away: each is reported to its sender.
    for _ in 0..2 {
        assert_eq!(next(&at_sender), Got::Undelivered { unsure: false });
    }
    w.stop_then_join().unwrap();
}
