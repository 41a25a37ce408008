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
    if run("coop_reg") {
        let coops = 20_000 * scale;
        let t = scenarios::coop_reg(coops);
        result("coop_reg", coops as f64 / t.as_secs_f64(), "coops/s");
    }
}
