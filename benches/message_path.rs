//! Criterion benches of the message path: ping-pong (direct, MPMC, with message limits) by
//! payload size, fan-out by subscriber count, coop registration, timer schedule/cancel and
//! mchain ping-pong. Each iteration is a whole scenario; times are divided into
//! per-message figures by the throughput settings.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

mod scenarios;

fn ping_pong(c: &mut Criterion) {
    let mut g = c.benchmark_group("ping_pong_one_thread");
    let rounds = 100_000u64;
    g.throughput(Throughput::Elements(2 * rounds));
    g.bench_function(BenchmarkId::new("payload_bytes", 8), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| scenarios::ping_pong_direct::<8>(rounds))
                .sum()
        })
    });
    g.bench_function(BenchmarkId::new("payload_bytes", 256), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| scenarios::ping_pong_direct::<256>(rounds))
                .sum()
        })
    });
    g.bench_function("mpmc", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| scenarios::ping_pong_mpmc(rounds)).sum())
    });
    g.bench_function("with_limits", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| scenarios::ping_pong_limits(rounds))
                .sum()
        })
    });
    g.finish();
}

fn timers_and_chains(c: &mut Criterion) {
    let mut g = c.benchmark_group("timers");
    let n = 100_000u64;
    g.throughput(Throughput::Elements(n));
    g.bench_function("schedule_cancel", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| scenarios::timer_schedule_cancel(n))
                .sum()
        })
    });
    g.finish();
    let mut g = c.benchmark_group("mchain");
    let rounds = 50_000u64;
    g.throughput(Throughput::Elements(2 * rounds));
    g.bench_function("ping_pong_two_threads", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| scenarios::mchain_ping_pong(rounds))
                .sum()
        })
    });
    g.finish();
}

fn fanout(c: &mut Criterion) {
    let mut g = c.benchmark_group("fanout");
    for receivers in [1u64, 4, 16] {
        let batches = 200;
        g.throughput(Throughput::Elements(receivers * batches * 1000));
        g.bench_function(BenchmarkId::new("subscribers", receivers), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| scenarios::fanout(receivers, batches).0)
                    .sum::<Duration>()
            })
        });
    }
    g.finish();
}

fn coops(c: &mut Criterion) {
    let mut g = c.benchmark_group("coop_reg");
    g.throughput(Throughput::Elements(2000));
    g.bench_function("coops_of_10", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| scenarios::coop_reg(2000)).sum())
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5));
    targets = ping_pong, fanout, coops, timers_and_chains
}
criterion_main!(benches);
