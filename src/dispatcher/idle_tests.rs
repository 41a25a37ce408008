use std::sync::Arc;

use super::*;

/// A worker that parked is woken by a producer, with the work counted.
#[test]
fn a_parked_worker_is_woken_by_a_notice() {
    for limit in [Duration::ZERO, Duration::from_micros(20)] {
        let idle = Arc::new(Idle::default());
        let worker = {
            let idle = idle.clone();
            std::thread::spawn(move || {
                idle.register_current();
                let mut spin = Spin::new(limit);
                let mut got = 0;
                while got < 1000 {
                    idle.wait(&mut spin);
                    while idle.has_pending() {
                        idle.taken();
                        got += 1;
                    }
                }
                got
            })
        };
        for i in 0..1000 {
            let n = idle.notify();
            idle.published(n);
            if i % 100 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(worker.join().unwrap(), 1000);
        assert!(!idle.has_pending());
    }
}

/// `has_pending` follows notices and takes one for one.
#[test]
fn pending_counts_notices_not_yet_taken() {
    let idle = Idle::default();
    assert!(!idle.has_pending());
    let a = idle.notify();
    let b = idle.notify();
    idle.published(a);
    idle.published(b);
    assert_eq!(idle.pending(), 2);
    idle.taken();
    assert!(idle.has_pending());
    idle.taken();
    assert!(!idle.has_pending());
    assert_eq!(idle.pending(), 0);
}

/// A budget that preemption lowered comes back by a sixteenth of the threshold per
/// spin that finds work, up to the threshold and never past it, for every threshold
/// from zero to `Duration::MAX` (which used to overflow on the first spin that found
/// work).
#[test]
fn successful_spins_restore_the_budget_up_to_the_threshold() {
    for limit in [
        Duration::ZERO,
        Duration::from_micros(20),
        Duration::from_secs(1),
        Duration::MAX,
    ] {
        let mut spin = Spin::new(limit);
        spin.budget = limit / 64;
        let mut last = spin.budget();
        for round in 1..=20u32 {
            assert!(spin.spin_until(|| true), "work was there");
            let now = spin.budget();
            assert!(now <= limit, "{limit:?}: {now:?} past the threshold");
            if limit.is_zero() {
                assert_eq!(now, Duration::ZERO);
            } else if round <= 15 {
                assert_eq!(now, last + limit / 16, "{limit:?}, spin {round}");
            } else {
                assert_eq!(now, limit, "{limit:?}, spin {round}");
            }
            last = now;
        }
    }
}
