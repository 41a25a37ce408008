//! The harmonizer's rules beyond YDB's scenarios (issue 32: many cores, debug builds),
//! each a departure the module's docs explain.

use super::*;

/// A bench with the budget set (as the driver does: the machine's cores).
fn bench_with_budget(pools: Vec<MockPool>, cores: f64) -> Bench {
    let mut b = Bench::new(pools);
    b.model.set_total_cores(Some(cores));
    for p in &mut b.pools {
        p.report_running = true;
    }
    b
}

/// Measured need: a pool whose threads are all busy and that has N more queues ready gets
/// the threads it can use in one step, bounded by its maximum and by the idle budget
/// (YDB grants one thread per step).
#[test]
fn a_pool_with_ready_queues_and_idle_budget_gets_what_it_can_use_in_one_step() {
    // (max, budget, ready queues) → threads after one step.
    for (max, cores, ready, want) in [
        (16, 16.0, 6, 8),   // 2 busy + 6 ready, 14 cores idle
        (16, 16.0, 30, 16), // capped by its maximum
        (16, 5.0, 30, 5),   // capped by the budget: 2 busy + 3 idle cores
        (16, 16.0, 0, 3),   // no queue waiting: YDB's rule, one more thread
    ] {
        let mut b = bench_with_budget(vec![MockPool::new(1, 2, max)], cores);
        b.harmonize_after(100_000);
        b.pools[0].run_busy(100_000, 1.0);
        b.pools[0].ready = ready;
        b.harmonize_after(100_000);
        assert_eq!(
            b.counts(),
            [want],
            "max {max}, budget {cores}, {ready} ready queues"
        );
        assert!(b.model.pool_stats()[0].is_needy);
    }
}

/// Threads that lose a little CPU to other threads of the process (a generator, a timer)
/// on a machine whose cores the pools do not oversubscribe are not "starved", however
/// many there are: the loss is judged against the pool's size, not as an absolute half
/// core (16 threads losing 6 % each lose 0.9 core in all).
#[test]
fn a_machine_that_is_not_oversubscribed_never_judges_a_pool_starved() {
    let mut b = bench_with_budget(vec![MockPool::new(1, 16, 16)], 17.0);
    b.harmonize_after(100_000);
    for _ in 0..30 {
        // 90 % busy (counted as fully busy), 94 % of it on a CPU.
        b.pools[0].add(0.09 * 0.94, 0.09, 0, 16);
        b.harmonize_after(100_000);
        let st = &b.model.pool_stats()[0];
        assert!(!st.is_starved, "cpu {} of {} elapsed", st.cpu, st.elapsed);
        assert_eq!(b.counts(), [16]);
    }
    // Still starved when it loses a third of its time.
    b.pools[0].run_busy(5_000_000, 0.6);
    b.harmonize_after(5_000_000);
    assert!(b.model.pool_stats()[0].is_starved);
}

/// A pool busy since the harmonizer started is judged on the time measured, not on a
/// window padded with idle seconds before the first reading: it is not hoggish and does
/// not shrink below its default in the first seconds (with 100 ms steps, YDB's windows
/// made it hoggish at once).
#[test]
fn a_pool_busy_from_the_start_is_not_hoggish_while_its_history_is_short() {
    let mut b = bench_with_budget(vec![MockPool::new(1, 4, 8)], 4.0);
    b.harmonize_after(100_000);
    for step in 0..30 {
        b.pools[0].run_busy(100_000, 1.0);
        b.harmonize_after(100_000);
        let st = &b.model.pool_stats()[0];
        assert!(!st.is_hoggish, "step {step}: elapsed {}", st.elapsed);
        assert_eq!(b.counts(), [4], "step {step}");
    }
}

/// A needy pool grows at every step while the budget allows, whatever the period: a
/// thread the harmonizer just started counts from its start (YDB's last-second window
/// counted it idle before, so the pool was needy again only a second later).
#[test]
fn a_needy_pool_grows_at_every_step_not_once_a_second() {
    let mut b = bench_with_budget(vec![MockPool::new(1, 1, 8)], 8.0);
    b.harmonize_after(100_000);
    for step in 1..8 {
        b.pools[0].run_busy(100_000, 1.0);
        b.harmonize_after(100_000);
        assert_eq!(b.counts(), [1 + step], "step {step}");
    }
}

/// A pool that keeps every core beside a pool of equal importance that is mostly parked:
/// it reaches the cores and keeps them (the parked pool's quarter of a core overbooks the
/// budget by less than half a core, which is no starvation).
#[test]
fn a_full_pool_keeps_the_cores_beside_a_mostly_parked_one_of_equal_importance() {
    let mut b = bench_with_budget(vec![MockPool::new(1, 1, 2), MockPool::new(1, 1, 2)], 2.0);
    b.harmonize_after(100_000);
    for step in 0..30 {
        b.pools[0].add(0.025, 0.025, 0, 1); // 25 % busy
        b.pools[1].run_busy(100_000, 1.0);
        b.pools[1].ready = 3;
        b.harmonize_after(100_000);
        let st = b.model.pool_stats();
        assert!(!st[1].is_starved, "step {step}");
        assert_eq!(b.counts(), [1, 2], "step {step}");
    }
}

/// A less important pool never takes the core that a more important pool's threads use in
/// part: that pool's events would wait for the OS to preempt the other pool's threads
/// (the bench measured an interactive p99 of 1–8 ms, as with fixed pools, when the batch
/// pool took the second of 2 cores beside an interactive pool at a quarter of a core).
#[test]
fn a_less_important_pool_leaves_the_core_a_more_important_one_uses_in_part() {
    let mut interactive = MockPool::new(1, 1, 2);
    interactive.spec.priority = 1;
    let mut b = bench_with_budget(vec![interactive, MockPool::new(1, 1, 3)], 3.0);
    b.harmonize_after(100_000);
    for step in 0..30 {
        b.pools[0].add(0.025, 0.025, 0, 1); // 25 % busy
        b.pools[1].run_busy(100_000, 1.0);
        b.pools[1].ready = 3;
        b.harmonize_after(100_000);
        assert_eq!(
            b.counts(),
            [1, 2],
            "step {step}: one core stays with interactive"
        );
    }
}

/// A more important pool that is all but idle (a parked thread's wake-ups) keeps no core
/// from a needy pool: whether one wake-up fell in the last second must not decide whether
/// the batch pool gets its thread.
#[test]
fn a_more_important_pool_with_only_wake_ups_reserves_no_core() {
    let mut interactive = MockPool::new(1, 1, 2);
    interactive.spec.priority = 1;
    let mut b = bench_with_budget(vec![interactive, MockPool::new(1, 1, 3)], 3.0);
    b.harmonize_after(100_000);
    for step in 0..30 {
        b.pools[0].add(0.000_01, 0.000_01, 0, 1); // wake-ups: 10 µs in 100 ms
        b.pools[1].run_busy(100_000, 1.0);
        b.pools[1].ready = 3;
        b.harmonize_after(100_000);
        assert_eq!(
            b.counts()[1],
            3,
            "step {step}: the batch pool takes the idle cores"
        );
    }
}

/// Debug builds run events more slowly, and the step (run by a worker when it next asks
/// for work) comes late and at uneven intervals; the figures that decide are fractions of
/// time and counts of ready queues, so the same load gives the same decisions step by
/// step whether the steps come every 100 ms, every second, or late and uneven.
#[test]
fn decisions_depend_on_load_fractions_not_on_the_step_timing() {
    let run = |periods: &[u64]| -> Vec<Vec<usize>> {
        let mut interactive = MockPool::new(1, 2, 4);
        interactive.spec.priority = 1;
        let mut b = bench_with_budget(vec![interactive, MockPool::new(1, 2, 4)], 4.0);
        b.harmonize_after(periods[0]);
        let mut counts = Vec::new();
        for step in 0..12 {
            let period = periods[step % periods.len()];
            // The interactive pool 10 % busy; the batch pool full, with 8 queues ready.
            let p = period as f64 / 1e6;
            let n = b.pools[0].full;
            b.pools[0].add(0.1 * p, 0.1 * p, 0, n);
            b.pools[1].run_busy(period, 1.0);
            b.pools[1].ready = 8;
            b.harmonize_after(period);
            counts.push(b.counts());
        }
        counts
    };
    let fast = run(&[100_000]);
    assert_eq!(fast, run(&[1_000_000]));
    assert_eq!(fast, run(&[130_000, 260_000, 170_000, 2_500_000]));
    // The batch pool takes the idle cores at once, all but the one the interactive pool
    // uses in part.
    assert_eq!(fast[0], [1, 3]);
    assert!(fast.iter().all(|c| c == &[1, 3]));
}

/// Threads that lose CPU while the pools do not outnumber the budget lose it to other
/// processes: the pool is flagged starved, but it keeps its threads and still grows
/// within the budget (shedding would hand the CPU to the other processes). A pool that
/// overbooks the budget by more than a grant's rounding still sheds (YDB's
/// `TestToNeedyNextToStarved`).
#[test]
fn a_pool_starved_by_other_processes_keeps_its_threads_within_the_budget() {
    let mut b = bench_with_budget(vec![MockPool::new(1, 1, 2), MockPool::new(1, 1, 2)], 2.0);
    b.harmonize_after(100_000);
    // One batch thread, 60 % of it on a CPU (the machine is busy with other work), three
    // queues ready: it grows to 2 all the same.
    b.pools[0].add(0.025, 0.025, 0, 1);
    b.pools[1].run_busy(100_000, 0.6);
    b.pools[1].ready = 3;
    b.harmonize_after(100_000);
    assert!(b.model.pool_stats()[1].is_starved);
    assert_eq!(b.counts(), [1, 2]);
    for step in 0..30 {
        b.pools[0].add(0.025, 0.025, 0, 1);
        b.pools[1].run_busy(100_000, 0.6);
        b.harmonize_after(100_000);
        assert!(b.model.pool_stats()[1].is_starved, "step {step}");
        assert_eq!(b.counts(), [1, 2], "step {step}");
    }
}

/// When the load moves from one pool to another, the pool that takes it keeps the
/// threads it gained: overbooking is judged on the last second (the pool the load left
/// is idle now, whatever its 8-second average still says), so a busy pool is not shed
/// for the other pool's past.
#[test]
fn a_pool_that_takes_over_a_load_is_not_shed_for_the_other_pool_s_past() {
    let mut b = bench_with_budget(vec![MockPool::new(1, 1, 2), MockPool::new(1, 1, 2)], 2.0);
    b.harmonize_after(S);
    b.pools[0].set_full(2);
    // Pool 0 busy on both threads for 5 s, on a machine busy with other work (60 % CPU).
    for _ in 0..5 {
        b.pools[0].run_busy(S, 0.6);
        b.harmonize_after(S);
        b.pools[0].set_full(2);
    }
    // The load moves to pool 1: it grows, and keeps its second thread while pool 0 goes
    // back to its default.
    for step in 0..8 {
        b.pools[1].run_busy(S, 0.6);
        b.pools[1].ready = 3;
        b.harmonize_after(S);
        if step >= 1 {
            assert_eq!(b.counts()[1], 2, "step {step}: {:?}", b.counts());
        }
    }
    assert_eq!(b.counts(), [1, 2]);
    assert_eq!(b.ops(1).decreasing_threads_by_starved_state, 0);
}

/// The bench's set-up on 16 cores (issue 32): an interactive pool (priority 1) and a batch
/// pool, each 1..=16 threads with a default of 8, a budget of 16; the interactive pool at
/// a quarter of a core, 32 batch queues always ready. The batch pool takes the idle cores
/// at the first step and keeps them (YDB's rules left it at 5–6 threads), all but the one
/// the interactive pool uses in part; the interactive pool goes back toward its minimum
/// one thread per step.
#[test]
fn the_bench_on_sixteen_cores_gives_the_batch_pool_the_idle_cores_at_once() {
    let mut interactive = MockPool::new(1, 8, 16);
    interactive.spec.priority = 1;
    let mut b = bench_with_budget(vec![interactive, MockPool::new(1, 8, 16)], 16.0);
    b.harmonize_after(100_000);
    for step in 0..20 {
        // A quarter of a core over the interactive threads.
        let n = b.pools[0].full;
        b.pools[0].add(0.025 / n as f64, 0.025 / n as f64, 0, n);
        let running = b.pools[1].full;
        b.pools[1].run_busy(100_000, 0.97);
        b.pools[1].ready = 32 - running;
        b.harmonize_after(100_000);
        let counts = b.counts();
        // 15 batch threads: the 16th core stays with the interactive pool.
        assert_eq!(counts[1], 15, "step {step}: {counts:?}");
        assert_eq!(
            counts[0],
            (7usize.saturating_sub(step)).max(1),
            "step {step}"
        );
        assert!(!b.model.pool_stats()[1].is_starved, "step {step}");
    }
}
