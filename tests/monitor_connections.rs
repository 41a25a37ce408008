//! The monitor's bound on connections (feature `monitor`, Linux: it counts the process's
//! threads by name). A file of its own: no other monitor may run in the process.

#![cfg(all(feature = "monitor", target_os = "linux"))]

mod monitor_support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use agentbox::monitor::Monitor;
use agentbox::prelude::*;
use monitor_support::get;

/// The most connections the docs let the monitor serve at once.
const BOUND: usize = 16;

/// The threads of this process named `name` (as Linux keeps it).
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim_end() == name)
                })
                .count()
        })
        .unwrap_or(0)
}

/// Rule: however many clients connect and send nothing, the monitor serves at most 16
/// at once (a thread each), and the page comes back once they are gone or timed out.
#[test]
fn silent_clients_get_no_more_than_the_bounded_connections() {
    Environment::launch(|env| {
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let addr = m.local_addr();
        let silent: Vec<TcpStream> = (0..80)
            .filter_map(|_| TcpStream::connect(addr).ok())
            .collect();
        assert!(silent.len() > BOUND);
        // Watch the threads while the server accepts them all.
        let until = Instant::now() + Duration::from_millis(800);
        let mut most = 0;
        while Instant::now() < until {
            most = most.max(threads_named("agentbox-page"));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(most >= 1, "no connection was served at all");
        assert!(most <= BOUND, "{most} connections served at once");
        drop(silent);
        monitor_support::wait_for("the page again", || {
            get(addr, "/api/environment").is_ok_and(|(s, _)| s == 200)
        });
        env.stop();
    })
    .unwrap();
}
