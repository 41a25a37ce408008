//! The monitor's JSON endpoints (feature `monitor`): what each shows, its errors, and when
//! the server stops.

#![cfg(feature = "monitor")]

mod monitor_support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentbox::monitor::{Monitor, MonitorError};
use agentbox::prelude::*;
use agentbox::ActorId;
use monitor_support::{get, get_json, request, two_nodes, wait_for, PATIENCE};
use serde_json::Value;

struct Go;

/// Moves to its state `working` on `Go`.
struct Worker {
    working: State,
}
impl Agent for Worker {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(|a: &mut Self, ctx, _: &Go| {
            let s = a.working.clone();
            let _ = ctx.change_state(&s);
        })?;
        Ok(())
    }
}

struct Idle;
impl Agent for Idle {}

/// Named `lonely`.
struct Lonely;
impl Agent for Lonely {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.set_name("lonely").unwrap();
        Ok(())
    }
}

fn agents(coops: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    fn walk(c: &Value, out: &mut Vec<Value>) {
        out.extend(c["agents"].as_array().unwrap().iter().cloned());
        for child in c["children"].as_array().unwrap() {
            walk(child, out);
        }
    }
    for c in coops["coops"].as_array().unwrap() {
        walk(c, &mut out);
    }
    out
}

#[test]
fn a_non_loopback_address_is_refused() {
    Environment::launch(|env| {
        match Monitor::start(env, "0.0.0.0:0") {
            Err(MonitorError::NotLoopback(a)) => assert!(a.ip().is_unspecified()),
            other => panic!("expected NotLoopback, got {other:?}"),
        }
        assert!(matches!(
            Monitor::start(env, "[::]:0"),
            Err(MonitorError::NotLoopback(_))
        ));
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        assert!(m.local_addr().ip().is_loopback());
        assert_ne!(m.local_addr().port(), 0);
        assert_eq!(m.url(), format!("http://{}/", m.local_addr()));
        env.stop();
    })
    .unwrap();
}

#[test]
fn coops_show_the_tree_with_each_agents_type_state_and_status() {
    Environment::launch(|env| {
        let working = State::new("working");
        let (worker, parent) = {
            let mut coop = env.make_coop();
            let mbox = coop.add_agent(Worker { working });
            (mbox, env.register_coop(coop).unwrap())
        };
        env.introduce_child_coop(&parent, |c| {
            c.add_agent(Idle);
        })
        .unwrap();
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let addr = m.local_addr();

        let coops = get_json(addr, "/api/coops");
        assert_eq!(coops["coops"].as_array().unwrap().len(), 1, "{coops}");
        let top = &coops["coops"][0];
        assert_eq!(top["status"], "registered");
        assert_eq!(top["agents"][0]["state"], "<default>");
        assert_eq!(top["agents"][0]["status"], "active");
        assert!(top["agents"][0]["type_name"]
            .as_str()
            .unwrap()
            .ends_with("::Worker"));
        assert_eq!(top["agents"][0]["name"], Value::Null);
        let child = &top["children"][0];
        assert_eq!(child["parent"], top["id"]);
        assert!(child["agents"][0]["type_name"]
            .as_str()
            .unwrap()
            .ends_with("::Idle"));

        send(&worker, Go).unwrap();
        wait_for("the worker's new state on the page", || {
            agents(&get_json(addr, "/api/coops"))
                .iter()
                .any(|a| a["state"] == "working")
        });

        let envv = get_json(addr, "/api/environment");
        assert_eq!(envv["coops"], 2);
        assert_eq!(envv["agents"], 2);
        env.stop();
    })
    .unwrap();
}

#[test]
fn environment_shows_named_mboxes_timers_and_drops() {
    Environment::launch(|env| {
        env.introduce_coop(|c| {
            c.add_agent(Idle);
        })
        .unwrap();
        let _named = env.named_mbox("config");
        let lonely = env.create_mbox();
        send(&lonely, 1u32).unwrap();
        send(&lonely, 2u32).unwrap();
        let _timer = send_periodic(
            &lonely,
            Duration::from_secs(3600),
            Duration::from_secs(3600),
            3u32,
        )
        .unwrap();
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let e = get_json(m.local_addr(), "/api/environment");
        assert_eq!(e["named_mboxes"], 1);
        assert_eq!(e["pending_timers"], 1);
        assert_eq!(e["drops"]["no_subscribers"], 2);
        assert_eq!(e["drops"]["no_handler"], 0);
        assert!(e["uptime_s"].as_f64().unwrap() >= 0.0);
        env.stop();
    })
    .unwrap();
}

#[test]
fn dispatchers_show_threads_queues_and_activity() {
    Environment::launch(|env| {
        let pool = agentbox::dispatcher::thread_pool::Builder::new()
            .name("crunch")
            .threads(2)
            .activity_tracking(true)
            .build()
            .unwrap();
        env.introduce_coop(|c| {
            c.set_binder(pool.binder());
            c.add_agent(Idle);
        })
        .unwrap();
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let d = get_json(m.local_addr(), "/api/dispatchers");
        let crunch = d["dispatchers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "crunch")
            .unwrap_or_else(|| panic!("no crunch in {d}"))
            .clone();
        assert_eq!(crunch["kind"], "thread_pool");
        assert_eq!(crunch["threads"], 2);
        assert_eq!(crunch["agents"], 1);
        let units = crunch["units"].as_array().unwrap();
        assert!(units
            .iter()
            .any(|u| u["tag"] == "wt-1" && u["work_count"].is_u64()));
        assert!(units.iter().any(|u| u["demands"].is_u64()));
        assert_eq!(d["harmonizers"], Value::Array(vec![]));
        // A fixed pool has no elastic figures.
        assert_eq!(crunch["elastic"], Value::Null);
        env.stop();
    })
    .unwrap();
}

struct Headline;

/// Reads `news` (subscribed in `define`).
struct Reader(Mbox);
impl Agent for Reader {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let news = self.0.clone();
        ctx.subscribe(&news)
            .event(|_: &mut Self, _, _: &Headline| {})?;
        Ok(())
    }
}

#[test]
fn named_mboxes_show_their_message_types_and_subscribers() {
    use agentbox::mbox::MultiSinkBinding;
    use agentbox::Sink;
    Environment::launch(|env| {
        let news = env.named_mbox("news");
        env.introduce_coop(|c| {
            c.add_agent(Reader(news.clone()));
        })
        .unwrap();
        // A binding of `news` to another mbox, and an introduced single-consumer mbox.
        let archive = env.create_mbox();
        let binding = MultiSinkBinding::new();
        binding
            .bind::<Headline>(&news, Sink::from(archive.clone()))
            .unwrap();
        let direct = env
            .introduce_named_mbox("app", "inbox", || {
                env.make_coop().add_agent(Idle) // a direct mbox: single-consumer
            })
            .unwrap();
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let v = get_json(m.local_addr(), "/api/mboxes");
        let boxes = v["mboxes"].as_array().unwrap();
        let news_view = boxes
            .iter()
            .find(|b| b["name"] == "news" && b["namespace"].is_null())
            .unwrap_or_else(|| panic!("no news in {v}"));
        assert_eq!(news_view["multi_consumer"], true);
        assert_eq!(news_view["id"], news.id().as_u64(), "{v}");
        let subs = &news_view["subscriptions"];
        assert_eq!(subs.as_array().unwrap().len(), 1, "{v}");
        assert_eq!(subs[0]["message_type"], "monitor_api::Headline");
        let who = subs[0]["subscribers"].as_array().unwrap();
        assert!(
            who.iter().any(|x| x["kind"] == "agent"
                && x["label"].as_str().unwrap().contains("monitor_api::Reader")
                && x["subscribed"] == true),
            "{v}"
        );
        assert!(
            who.iter()
                .any(|x| x["kind"] == "mbox" && x["label"] == archive.name().as_str()),
            "{v}"
        );
        let inbox = boxes
            .iter()
            .find(|b| b["name"] == "inbox")
            .unwrap_or_else(|| panic!("no inbox in {v}"));
        assert_eq!(inbox["namespace"], "app");
        assert_eq!(inbox["multi_consumer"], false);
        assert_eq!(inbox["id"], direct.id().as_u64());
        // In /api/all too.
        assert!(get_json(m.local_addr(), "/api/all")["mboxes"]["mboxes"].is_array());
        // A binding removed leaves the list.
        drop(binding);
        let v = get_json(m.local_addr(), "/api/mboxes");
        let news_view = v["mboxes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == "news")
            .unwrap()
            .clone();
        assert_eq!(
            news_view["subscriptions"][0]["subscribers"]
                .as_array()
                .unwrap()
                .len(),
            1,
            "{v}"
        );
        env.stop();
    })
    .unwrap();
}

struct Count;

/// Handles `Count`.
struct Counter;
impl Agent for Counter {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|_: &mut Self, _, _: &Count| {})?;
        Ok(())
    }
}

#[test]
fn an_agent_on_its_own_tracked_thread_shows_what_it_handled() {
    Environment::launch(|env| {
        let own = agentbox::dispatcher::active_obj::Builder::new()
            .activity_tracking(true)
            .build()
            .unwrap();
        let counter = env
            .introduce_coop(|c| {
                c.set_binder(own.binder());
                let counted = c.add_agent(Counter);
                c.add_agent(Idle);
                counted
            })
            .unwrap();
        for _ in 0..5 {
            send(&counter, Count).unwrap();
        }
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let of = |id: u64| {
            agents(&get_json(m.local_addr(), "/api/coops"))
                .into_iter()
                .find(|a| a["id"] == id)
                .unwrap()
        };
        // `on_start` and the five messages: its thread ran them all, and nothing else.
        let id = counter.id().as_u64();
        wait_for("the five messages handled", || {
            of(id)["handled"].as_u64().is_some_and(|n| n >= 5)
        });
        let counted = of(id)["handled"].as_u64().unwrap();
        assert!((5..=7).contains(&counted), "{}", of(id));
        // An agent sharing its thread (the default dispatcher's) has no count of its own.
        let shared = env.introduce_coop(|c| c.add_agent(Counter)).unwrap();
        send(&shared, Count).unwrap();
        assert!(of(shared.id().as_u64())["handled"].is_null());
        env.stop();
    })
    .unwrap();
}

/// Tells the test the name of the thread it runs on.
struct WhereAmI(mpsc::Sender<String>);
impl Agent for WhereAmI {
    fn on_start(&mut self, _: &mut Context<Self>) {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        let _ = self.0.send(name);
    }
}

#[test]
fn worker_threads_show_the_os_threads_names() {
    use agentbox::dispatcher::{active_obj, one_thread, thread_pool};
    Environment::launch(|env| {
        let (tx, rx) = mpsc::channel();
        let binders = [
            (
                "pool",
                thread_pool::Builder::new()
                    .name("pool")
                    .threads(2)
                    .activity_tracking(true)
                    .build()
                    .unwrap(),
            ),
            (
                "solo",
                one_thread::Builder::new()
                    .name("solo")
                    .activity_tracking(true)
                    .build()
                    .unwrap(),
            ),
            (
                "own",
                active_obj::Builder::new()
                    .name("own")
                    .activity_tracking(true)
                    .build()
                    .unwrap(),
            ),
        ];
        for (_, d) in &binders {
            env.introduce_coop(|c| {
                c.set_binder(d.binder());
                c.add_agent(WhereAmI(tx.clone()));
            })
            .unwrap();
        }
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let d = get_json(m.local_addr(), "/api/dispatchers");
        for _ in &binders {
            let seen = rx.recv_timeout(PATIENCE).expect("each agent starts");
            // The thread the agent ran on is one of its dispatcher's units, by name.
            let (name, _) = binders
                .iter()
                .find(|(n, _)| seen.starts_with(n))
                .unwrap_or_else(|| panic!("thread {seen:?} of no dispatcher"));
            let disp = d["dispatchers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == *name)
                .unwrap();
            assert!(
                disp["units"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|u| u["thread"] == seen.as_str()),
                "no unit of {name} has the thread {seen:?}: {disp}"
            );
        }
        env.stop();
    })
    .unwrap();
}

#[test]
fn each_queue_and_thread_says_whose_it_is() {
    use agentbox::{BindParams, Fifo};
    Environment::launch(|env| {
        let pool = agentbox::dispatcher::thread_pool::Builder::new()
            .name("owned")
            .threads(1)
            .activity_tracking(true)
            .build()
            .unwrap();
        env.introduce_coop(|c| {
            c.set_binder(pool.binder_with(BindParams::new().fifo(Fifo::Individual)));
            c.add_agent(Lonely);
        })
        .unwrap();
        let shared = {
            let mut coop = env.make_coop();
            coop.set_binder(pool.binder());
            coop.add_agent(Idle);
            env.register_coop(coop).unwrap()
        };
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let d = get_json(m.local_addr(), "/api/dispatchers");
        let units = d["dispatchers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "owned")
            .unwrap_or_else(|| panic!("no pool in {d}"))["units"]
            .as_array()
            .unwrap()
            .clone();
        let owner = |tag: String| {
            units
                .iter()
                .find(|u| u["tag"] == tag.as_str())
                .unwrap_or_else(|| panic!("no unit {tag} in {units:?}"))["owner"]
                .clone()
        };
        // An agent's own queue: the agent's id, type and name; a coop's: the coop; a
        // worker thread: its index.
        let agent_id = get_json(m.local_addr(), "/api/coops")["coops"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["agents"].as_array().unwrap().clone())
            .find(|a| a["name"] == "lonely")
            .unwrap()["id"]
            .as_u64()
            .unwrap();
        assert_eq!(
            owner(format!("aq-{agent_id}")),
            format!("agent {agent_id} monitor_api::Lonely \"lonely\"")
        );
        assert_eq!(
            owner(format!("cq-{}", shared.id())),
            format!("coop {}", shared.id())
        );
        assert_eq!(owner("wt-0".into()), "worker thread 0");
        env.stop();
    })
    .unwrap();
}

#[test]
fn an_elastic_pool_shows_its_range_threads_and_harmonizer_until_it_is_dropped() {
    use agentbox::harmonizer::Harmonizer;
    Environment::launch(|env| {
        let pool = agentbox::dispatcher::thread_pool::Builder::new()
            .name("elastic")
            .thread_limits(1, 2, 3)
            .build()
            .unwrap();
        env.introduce_coop(|c| {
            c.set_binder(pool.binder());
            c.add_agent(Idle);
        })
        .unwrap();
        let h = Harmonizer::builder()
            .dispatcher(&pool)
            .cpu_budget(2.0)
            .period(Duration::from_secs(3600))
            .build()
            .unwrap();
        h.harmonize_at(h.origin() + Duration::from_secs(1));
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        m.add_harmonizer(&h);
        m.add_harmonizer(&h); // shown once
        let d = get_json(m.local_addr(), "/api/dispatchers");
        let e = d["dispatchers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "elastic")
            .unwrap_or_else(|| panic!("no elastic pool in {d}"))
            .clone();
        let el = &e["elastic"];
        assert_eq!(el["min"], 1, "{e}");
        assert_eq!(el["default"], 2, "{e}");
        assert_eq!(el["max"], 3, "{e}");
        assert!(
            el["target"].as_u64().is_some_and(|t| (1..=3).contains(&t)),
            "{e}"
        );
        for k in ["increasing_threads_by_needy_state", "is_hoggish"] {
            assert!(el["harmonizer"][k].is_u64(), "{k} missing in {e}");
        }
        let units = e["units"].as_array().unwrap();
        assert!(
            units
                .iter()
                .any(|u| u["tag"] == "wt-0" && u["busy_us"].is_u64() && u["cpu_us"].is_u64()),
            "{e}"
        );

        let hs = d["harmonizers"].as_array().unwrap();
        assert_eq!(hs.len(), 1, "{d}");
        assert_eq!(hs[0]["iterations"], 1);
        assert_eq!(hs[0]["total_cores"], 2.0);
        let p = &hs[0]["pools"][0];
        assert_eq!(p["min_threads"], 1, "{p}");
        assert_eq!(p["max_threads"], 3, "{p}");
        assert_eq!(p["default_threads"], 2, "{p}");
        assert!(
            ["needy", "starved", "hoggish", "balanced"].contains(&p["state"].as_str().unwrap()),
            "{p}"
        );
        assert!(
            p["operations"]["IncreasingThreadsByNeedyState"].is_u64(),
            "{p}"
        );

        // The monitor does not keep the harmonizer: once dropped, it leaves the page.
        drop(h);
        let d = get_json(m.local_addr(), "/api/dispatchers");
        assert_eq!(d["harmonizers"], Value::Array(vec![]), "{d}");
        env.stop();
    })
    .unwrap();
}

#[test]
fn systems_and_sessions_of_two_nodes() {
    Environment::launch(|env| {
        let (systems, nodes) = two_nodes(env);
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        for s in &systems {
            m.add_system(s).unwrap();
            m.add_system(s).unwrap(); // shown once
        }
        for n in &nodes {
            m.add_node(n);
        }
        let addr = m.local_addr();
        systems[0].send(ActorId::new(1, 424_242, 0), monitor_support::Ping);

        wait_for("both sessions connected with traffic", || {
            let ic = get_json(addr, "/api/interconnect");
            let nodes = ic["nodes"].as_array().unwrap();
            nodes.len() == 2
                && nodes.iter().all(|n| {
                    let s = &n["sessions"][0];
                    s["connected"] == true && s["events_in"].as_u64().unwrap_or(0) > 0
                })
        });
        let ic = get_json(addr, "/api/interconnect");
        assert_eq!(ic["nodes"][0]["node_id"], 1);
        assert_eq!(ic["nodes"][0]["sessions"][0]["peer"], 2);
        assert_eq!(ic["nodes"][1]["sessions"][0]["peer"], 1);
        assert!(ic["nodes"][0]["sessions"][0]["bytes_out"].as_u64().unwrap() > 0);
        assert_eq!(ic["nodes"][0]["refusals"], Value::Array(vec![]));

        let s = get_json(addr, "/api/systems");
        let list = s["systems"].as_array().unwrap();
        assert_eq!(list.len(), 2, "{s}");
        let one = &list[0];
        assert_eq!(one["node_id"], 1);
        assert_eq!(one["dead_letters"], 1);
        assert_eq!(one["dead_letter_reasons"]["ActorUnknown"], 1);
        assert_eq!(one["recent_dead_letters"][0]["recipient"], "[1:424242:0]");
        let two = &list[1];
        assert!(two["services"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["service"] == ActorId::service(2, b"ponger").unwrap().to_string()));
        assert!(two["pools"][0]["actors"].as_u64().unwrap() >= 1);

        let all = get_json(addr, "/api/all");
        for k in [
            "environment",
            "coops",
            "dispatchers",
            "systems",
            "interconnect",
            "history",
        ] {
            assert!(all.get(k).is_some(), "{k} missing from /api/all");
        }
        for s in &systems {
            s.stop();
        }
        env.stop();
    })
    .unwrap();
}

#[test]
fn the_history_gains_a_sample_a_second() {
    Environment::launch(|env| {
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        wait_for("three samples", || {
            get_json(m.local_addr(), "/api/history")["samples"]
                .as_array()
                .unwrap()
                .len()
                >= 3
        });
        let h = get_json(m.local_addr(), "/api/history");
        assert_eq!(h["period_s"], 1.0);
        let t: Vec<f64> = h["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["t"].as_f64().unwrap())
            .collect();
        assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
        env.stop();
    })
    .unwrap();
}

#[test]
fn the_history_keeps_each_sessions_round_trip_times() {
    Environment::launch(|env| {
        let (systems, nodes) = two_nodes(env);
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        for n in &nodes {
            m.add_node(n);
        }
        let rtt_of = |h: &Value, node: u64, peer: u64| -> Vec<Value> {
            h["rtt"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["node"] == node && r["peer"] == peer)
                .map(|r| r["samples"].as_array().unwrap().clone())
                .unwrap_or_default()
        };
        // Pings every 200 ms, a sample a second: two samples with an RTT come.
        wait_for("two RTT samples of the session 1 → 2", || {
            let h = get_json(m.local_addr(), "/api/history");
            rtt_of(&h, 1, 2)
                .iter()
                .filter(|s| s["rtt_us"].is_u64())
                .count()
                >= 2
        });
        let h = get_json(m.local_addr(), "/api/history");
        let samples = rtt_of(&h, 1, 2);
        assert!(samples.len() <= 60, "{h}");
        let times: Vec<f64> = samples.iter().map(|s| s["t"].as_f64().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{h}");
        // The session's line is at the chart's seconds.
        let chart: Vec<f64> = h["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["t"].as_f64().unwrap())
            .collect();
        assert!(times.iter().all(|t| chart.contains(t)), "{h}");
        for s in &systems {
            s.stop();
        }
        env.stop();
    })
    .unwrap();
}

#[test]
fn the_page_unknown_paths_and_other_methods() {
    Environment::launch(|env| {
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let (status, page) = get(m.local_addr(), "/").unwrap();
        assert_eq!(status, 200);
        assert!(page.contains("<title>agentbox monitor</title>"));
        assert_eq!(get(m.local_addr(), "/api/nothing").unwrap().0, 404);
        assert_eq!(request(m.local_addr(), "POST", "/api/all").unwrap().0, 405);
        env.stop();
    })
    .unwrap();
}

#[test]
fn dropping_the_monitor_stops_the_server() {
    Environment::launch(|env| {
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let addr = m.local_addr();
        assert_eq!(get(addr, "/api/environment").unwrap().0, 200);
        let started = Instant::now();
        drop(m);
        assert!(started.elapsed() < PATIENCE, "the drop waited too long");
        // The listener is gone: no answer any more (refused, or closed unanswered).
        wait_for("the listener to go", || {
            get(addr, "/api/environment").map_or(true, |(s, _)| s == 0)
        });
        env.stop();
    })
    .unwrap();
}

#[test]
fn the_server_ends_when_the_environment_stops() {
    let (tx, rx) = mpsc::channel();
    let mut kept = None;
    Environment::launch(|env| {
        env.introduce_coop(|c| {
            c.add_agent(Idle);
        })
        .unwrap();
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        tx.send(m.local_addr()).unwrap();
        kept = Some(m);
        env.stop();
    })
    .unwrap();
    let m = kept.unwrap();
    let addr = rx.recv().unwrap();
    wait_for("the server's thread to end", || !m.is_running());
    assert!(get(addr, "/api/environment").map_or(true, |(s, _)| s == 0));
    drop(m); // no hang
}

/// `GET path` until it answers 200, each try bounded by what is left of `bound`; the
/// status of the last try otherwise.
fn page_within(addr: std::net::SocketAddr, path: &str, bound: Duration) -> u16 {
    use std::io::{Read, Write};
    let deadline = Instant::now() + bound;
    let mut last = 0;
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, left) else {
            continue;
        };
        let _ = s.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        if write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").is_err() {
            continue;
        }
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        last = answer
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        if last == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    last
}

/// Rule: clients that pipeline requests and never read their answers, or connect and
/// send nothing, keep no other client from the page, and dropping the monitor still
/// returns promptly (the docs promise 100 ms plus the answer being made).
#[test]
fn clients_that_never_read_block_neither_the_page_nor_the_drop() {
    use std::io::Write;
    use std::net::TcpStream;
    // Generous bounds for a loaded machine; a wedged server never answers at all.
    const PAGE_BOUND: Duration = Duration::from_secs(15);
    const DROP_BOUND: Duration = Duration::from_secs(3);
    Environment::launch(|env| {
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let addr = m.local_addr();
        assert_eq!(page_within(addr, "/", PAGE_BOUND), 200);
        // Greedy clients: many pipelined requests for the page, never a read, until
        // their own writes stall.
        let request = format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let greedy: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_write_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                for _ in 0..5_000 {
                    if s.write_all(request.as_bytes()).is_err() {
                        break;
                    }
                }
                s
            })
            .collect();
        // Silent clients: connected, nothing sent.
        let silent: Vec<TcpStream> = (0..40)
            .filter_map(|_| TcpStream::connect(addr).ok())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            page_within(addr, "/api/environment", PAGE_BOUND),
            200,
            "another client got no page"
        );
        // The drop, watched from here: a wedged server would hang it for good.
        let (done, dropped) = mpsc::channel();
        let started = Instant::now();
        std::thread::spawn(move || {
            drop(m);
            let _ = done.send(());
        });
        let in_time = dropped.recv_timeout(DROP_BOUND).is_ok();
        let took = started.elapsed();
        drop(greedy);
        drop(silent);
        assert!(
            in_time,
            "dropping the monitor took more than {DROP_BOUND:?}"
        );
        assert!(took < DROP_BOUND, "{took:?}");
        env.stop();
    })
    .unwrap();
}

/// Sends `raw` on a connection of its own and reads the whole answer.
fn raw_exchange(addr: std::net::SocketAddr, raw: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(raw).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// Rule: a request the page cannot read gets an HTTP error status and the close, never
/// a hang; `HEAD` gets the head of `GET`'s answer without its body.
#[test]
fn malformed_requests_get_error_statuses_and_head_gets_no_body() {
    Environment::launch(|env| {
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let addr = m.local_addr();
        let garbage = raw_exchange(addr, b"hello there\r\n\r\n");
        assert!(garbage.starts_with("HTTP/1.1 400"), "{garbage}");
        let mut huge = b"GET / HTTP/1.1\r\nX-Filler: ".to_vec();
        huge.extend(std::iter::repeat_n(b'a', 64 * 1024));
        huge.extend_from_slice(b"\r\n\r\n");
        let too_big = raw_exchange(addr, &huge);
        assert!(too_big.starts_with("HTTP/1.1 431"), "{too_big}");
        let head = raw_exchange(addr, b"HEAD /api/environment HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let (fields, body) = head.split_once("\r\n\r\n").unwrap();
        assert!(fields.contains("Content-Length: "), "{fields}");
        assert!(body.is_empty(), "{body}");
        // The page still answers afterwards.
        assert_eq!(get(addr, "/api/environment").unwrap().0, 200);
        env.stop();
    })
    .unwrap();
}
