//! The monitor's page in a real browser (feature `monitor`): headless Chromium loads it,
//! runs its JavaScript for a few (virtual) seconds, and the DOM it leaves shows the agents
//! and the sessions of a two-node system.
//!
//! Needs Debian's `chromium` (`.ci/run` installs it). Without it the test says so loudly
//! and passes, unless `AGENTBOX_REQUIRE_CHROMIUM` is set (as `.ci/run` sets it once
//! chromium is there): then a missing browser fails it.

#![cfg(feature = "monitor")]

mod monitor_support;

use std::process::Command;
use std::time::{Duration, Instant};

use agentbox::monitor::Monitor;
use agentbox::prelude::*;
use monitor_support::{get_json, two_nodes, wait_for, PATIENCE};

struct Sentinel;
impl Agent for Sentinel {}

struct Headline;

/// Reads the named mbox `news`.
struct Reader(Mbox);
impl Agent for Reader {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let news = self.0.clone();
        ctx.subscribe(&news)
            .event(|_: &mut Self, _, _: &Headline| {})?;
        Ok(())
    }
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The DOM of `url` after `budget_ms` of virtual time.
fn dump_dom(browser: &str, url: &str, budget_ms: u32) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            // A common laptop screen's width: the harmonizer's table must fit it.
            "--window-size=1400,900",
            &format!("--virtual-time-budget={budget_ms}"),
            "--dump-dom",
            url,
        ])
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn updates(dom: &str) -> u32 {
    dom.split("data-updates=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_page_shows_the_agents_and_sessions_of_two_nodes_live() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("AGENTBOX_REQUIRE_CHROMIUM").is_none(),
            "AGENTBOX_REQUIRE_CHROMIUM is set but no chromium was found"
        );
        eprintln!(
            "\n*** monitor_page: SKIPPED, no chromium here (apt-get install -y chromium) ***\n"
        );
        return;
    };
    Environment::launch(|env| {
        let news = env.named_mbox("news");
        env.introduce_coop(|c| {
            c.add_agent(Sentinel);
            c.add_agent(Reader(news.clone()));
        })
        .unwrap();
        let (systems, nodes) = two_nodes(env);
        // An elastic pool and its harmonizer, stepped once by hand.
        let elastic = agentbox::dispatcher::thread_pool::Builder::new()
            .name("elastic")
            .thread_limits(1, 2, 3)
            .build()
            .unwrap();
        let harmonizer = agentbox::harmonizer::Harmonizer::builder()
            .dispatcher(&elastic)
            .period(Duration::from_secs(3600))
            .build()
            .unwrap();
        harmonizer.harmonize_at(harmonizer.origin() + Duration::from_secs(1));
        env.introduce_coop(|c| {
            c.set_binder(elastic.binder());
            c.add_agent(Sentinel);
        })
        .unwrap();
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        m.add_harmonizer(&harmonizer);
        for s in &systems {
            m.add_system(s).unwrap();
        }
        for n in &nodes {
            m.add_node(n);
        }
        wait_for("both sessions connected", || {
            get_json(m.local_addr(), "/api/interconnect")["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["sessions"][0]["connected"] == true)
        });

        wait_for("a round-trip time in the history", || {
            get_json(m.local_addr(), "/api/history")["rtt"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| {
                    r["samples"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|s| s["rtt_us"].is_u64())
                })
        });
        // The page polls once a second: with 3 s of virtual time it has rendered a few
        // times. A loaded machine may need another go.
        let deadline = Instant::now() + PATIENCE;
        let dom = loop {
            let dom = dump_dom(browser, &m.url(), 3000);
            if updates(&dom) >= 2 || Instant::now() > deadline {
                break dom;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(updates(&dom) >= 2, "the page did not update live:\n{dom}");
        assert!(dom.contains("live — updated"), "{dom}");
        // The agents, by type.
        assert!(dom.contains("monitor_page::Sentinel"), "{dom}");
        assert!(dom.contains("monitor_support::Ponger&gt;\""), "{dom}");
        // The session of each node with the other, connected.
        for (node, peer) in [(1, 2), (2, 1)] {
            let row = format!(
                "<tr class=\"session\" data-node=\"{node}\" data-peer=\"{peer}\" data-connected=\"true\">"
            );
            assert!(dom.contains(&row), "no connected session {node} → {peer}:\n{dom}");
        }
        // Each session's round-trip times over the last minute.
        let spark = dom
            .split("data-rtt-samples=\"")
            .skip(1)
            .filter_map(|r| r.split('"').next()?.parse::<u32>().ok())
            .max()
            .unwrap_or(0);
        assert!(spark >= 1, "no session's RTT line:\n{dom}");
        // The elastic pool's range and the harmonizer's row of it.
        assert!(dom.contains("data-elastic=\"elastic\""), "{dom}");
        assert!(dom.contains("data-harmonizer=\"elastic\""), "{dom}");
        assert!(dom.contains("<tr data-pool=\"elastic\" data-state=\""), "{dom}");
        // Its states are explained in place, and its table fits 1 400 px without scrolling.
        assert!(
            dom.contains("data-states=\"balanced,needy,hoggish,starved\""),
            "{dom}"
        );
        assert!(dom.contains("at least one of its threads was idle"), "{dom}");
        assert!(
            dom.contains("class=\"harmonizer\" data-fits=\"true\""),
            "the harmonizer's table is wider than the page at 1 400 px:\n{dom}"
        );
        // The named mbox with its message type and subscriber.
        let row = dom
            .split("data-mbox=\"news\" data-message=\"monitor_page::Headline\">")
            .nth(1)
            .unwrap_or_else(|| panic!("no row of the mbox news:\n{dom}"));
        let row = row.split("</tr>").next().unwrap_or("");
        assert!(row.contains("Reader"), "{row}");
        // Each queue and thread says whose it is.
        assert!(
            dom.contains("data-unit=\"wt-0\" data-owner=\"worker thread 0\""),
            "{dom}"
        );
        assert!(dom.contains("worker thread 0 · thread elastic-0"), "{dom}");
        // The chart has samples, a time axis of the last minute and value axes.
        assert!(dom.contains("data-samples=\""), "{dom}");
        assert!(
            dom.contains("data-x-axis=\"−60 s,−45 s,−30 s,−15 s,now\""),
            "{dom}"
        );
        assert!(dom.contains("data-y-axis=\""), "{dom}");
        for s in &systems {
            s.stop();
        }
        env.stop();
    })
    .unwrap();
}
