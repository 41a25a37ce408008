//! The benchmark figures, one `RESULT name=… value=… unit=…` line each.
//!
//! `cargo run --release --example bench [-- --quick]` (quick: well under 20 s in all).
//! Every scenario verifies its own counts. Compare figures as ratios within one run: the
//! machine may be shared and noisy.

#[path = "../benches/scenarios.rs"]
mod scenarios;

use std::time::Duration;

/// A ping-pong scenario: runs `rounds` round trips, returns the time they took.
type PingPong = fn(u64) -> Duration;

/// Prints one rate figure: `count` things done in `time`.
fn rate(name: &str, count: u64, time: Duration, unit: &str) {
    println!(
        "RESULT name={name} value={:.0} unit={unit}",
        count as f64 / time.as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only NAME` runs one figure (for profiling).
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let scale = if quick { 1 } else { 5 };

    // Ping-pong figures: `rounds` round trips are `2 * rounds` messages.
    let ping_pongs: [(&str, u64, PingPong); 5] = [
        (
            "ping_pong_one_thread",
            2_000_000,
            scenarios::ping_pong_direct::<8>,
        ),
        ("ping_pong_limits", 2_000_000, scenarios::ping_pong_limits),
        ("ping_pong_mpmc", 1_000_000, scenarios::ping_pong_mpmc),
        (
            "ping_pong_cross_thread",
            200_000,
            scenarios::ping_pong_cross_thread,
        ),
        ("mchain_ping_pong", 200_000, scenarios::mchain_ping_pong),
    ];
    for (name, rounds, scenario) in ping_pongs {
        if run(name) {
            let rounds = rounds * scale;
            rate(name, 2 * rounds, scenario(rounds), "msg/s");
        }
    }
    if run("fanout_16") {
        let (t, deliveries) = scenarios::fanout(16, 1000 * scale);
        rate("fanout_16", deliveries, t, "deliveries/s");
    }
    if run("ring_50k") {
        let (t, hops) = scenarios::ring(50_000, 2_000_000 * scale);
        rate("ring_50k", hops, t, "hops/s");
    }
    if run("ring_50k_thread_pool") {
        let (t, hops) = scenarios::ring_thread_pool(50_000, 500_000 * scale);
        rate("ring_50k_thread_pool", hops, t, "hops/s");
    }
    if run("thread_pool_many_agents") {
        let (t, handled) = scenarios::thread_pool_many_agents(1024, 64, 100);
        rate("thread_pool_many_agents", handled, t, "msg/s");
    }
    if only.as_deref() == Some("skynet_100k") {
        // For profiling only (`--only skynet_100k`): one level less.
        let (t, sum, _) = scenarios::skynet(5);
        assert_eq!(sum, 4_999_950_000, "skynet sum");
        println!(
            "RESULT name=skynet_100k value={:.3} unit=s",
            t.as_secs_f64()
        );
    }
    if run("skynet_1m") {
        let (t, sum, _with_teardown) = scenarios::skynet(6);
        assert_eq!(sum, 499_999_500_000, "skynet sum");
        println!("RESULT name=skynet_1m value={:.3} unit=s", t.as_secs_f64());
    }
    if run("timer_schedule_cancel") {
        let n = 1_000_000 * scale;
        rate(
            "timer_schedule_cancel",
            n,
            scenarios::timer_schedule_cancel(n),
            "timers/s",
        );
    }
    if run("coop_reg") {
        let coops = 20_000 * scale;
        rate("coop_reg", coops, scenarios::coop_reg(coops), "coops/s");
    }
}
