use loom::sync::Arc;

use super::{Idle, Spin, Woken};
use std::time::Duration;

/// Producers notify, publish (a flag per producer) and wake; the worker waits until it
/// has taken every notice. A lost wake-up leaves the worker parked forever, which loom
/// reports as a deadlock.
fn no_lost_wake_up(producers: usize, spin: Duration) {
    loom::model(move || {
        let idle = Arc::new(Idle::default());
        idle.register_current();
        // Not joined: a late unpark (legal, see "Races") leaves a park token that
        // loom's `join` mistakes for its own wake-up (loom issue #249,
        // "assertion failed: state.notified"). loom runs every thread to its end.
        for _ in 0..producers {
            let idle = idle.clone();
            loom::thread::spawn(move || {
                let n = idle.notify();
                idle.published(n);
            });
        }
        let mut spin = Spin::new(spin);
        let mut taken = 0;
        while taken < producers {
            if !idle.has_pending() {
                let _: Woken = idle.wait(&mut spin);
            }
            while idle.has_pending() {
                idle.taken();
                taken += 1;
            }
        }
        assert!(!idle.has_pending());
    });
}

#[test]
fn one_producer_parking_at_once() {
    no_lost_wake_up(1, Duration::ZERO);
}

#[test]
fn one_producer_after_a_spin() {
    no_lost_wake_up(1, Duration::from_micros(1));
}

#[test]
fn two_producers_parking_at_once() {
    no_lost_wake_up(2, Duration::ZERO);
}

#[test]
fn two_producers_after_a_spin() {
    no_lost_wake_up(2, Duration::from_micros(1));
}
