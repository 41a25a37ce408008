//! The benchmark figures, one `RESULT name=… value=… unit=…` line each.
//!
//! `cargo run --release --example bench [-- --quick]` (quick: well under 20 s in all).
//! Every scenario verifies its own counts. Compare figures as ratios within one run: the
//! machine may be shared and noisy.

#[path = "../benches/scenarios.rs"]
mod scenarios;

fn result(name: &str, value: f64, unit: &str) {
    println!("RESULT name={name} value={value:.0} unit={unit}");
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

    if run("ping_pong_one_thread") {
        let rounds = 2_000_000 * scale;
        let t = scenarios::ping_pong_direct::<8>(rounds);
        result(
            "ping_pong_one_thread",
            (2 * rounds) as f64 / t.as_secs_f64(),
            "msg/s",
        );
    }
    if run("ping_pong_limits") {
        let rounds = 2_000_000 * scale;
        let t = scenarios::ping_pong_limits(rounds);
        result(
            "ping_pong_limits",
            (2 * rounds) as f64 / t.as_secs_f64(),
            "msg/s",
        );
    }
    if run("ping_pong_mpmc") {
        let rounds = 1_000_000 * scale;
        let t = scenarios::ping_pong_mpmc(rounds);
        result(
            "ping_pong_mpmc",
            (2 * rounds) as f64 / t.as_secs_f64(),
            "msg/s",
        );
    }
    if run("ping_pong_cross_thread") {
        let rounds = 200_000 * scale;
        let t = scenarios::ping_pong_cross_thread(rounds);
        result(
            "ping_pong_cross_thread",
            (2 * rounds) as f64 / t.as_secs_f64(),
            "msg/s",
        );
    }
    if run("fanout_16") {
        let (t, deliveries) = scenarios::fanout(16, 1000 * scale);
        result(
            "fanout_16",
            deliveries as f64 / t.as_secs_f64(),
            "deliveries/s",
        );
    }
    if run("ring_50k") {
        let (t, hops) = scenarios::ring(50_000, 2_000_000 * scale);
        result("ring_50k", hops as f64 / t.as_secs_f64(), "hops/s");
    }
    if run("ring_50k_thread_pool") {
        let (t, hops) = scenarios::ring_thread_pool(50_000, 500_000 * scale);
        result(
            "ring_50k_thread_pool",
            hops as f64 / t.as_secs_f64(),
            "hops/s",
        );
    }
    if run("thread_pool_many_agents") {
        let (t, handled) = scenarios::thread_pool_many_agents(1024, 64, 100);
        result(
            "thread_pool_many_agents",
            handled as f64 / t.as_secs_f64(),
            "msg/s",
        );
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
        let t = scenarios::timer_schedule_cancel(n);
        result(
            "timer_schedule_cancel",
            n as f64 / t.as_secs_f64(),
            "timers/s",
        );
    }
    if run("mchain_ping_pong") {
        let rounds = 200_000 * scale;
        let t = scenarios::mchain_ping_pong(rounds);
        result(
            "mchain_ping_pong",
            (2 * rounds) as f64 / t.as_secs_f64(),
            "msg/s",
        );
    }
    if run("coop_reg") {
        let coops = 20_000 * scale;
        let t = scenarios::coop_reg(coops);
        result("coop_reg", coops as f64 / t.as_secs_f64(), "coops/s");
    }
}
