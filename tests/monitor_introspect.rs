//! `Environment::introspect`, the core's read-only snapshot the monitor's page is built on
//! (no feature needed).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentbox::environment::{AgentStatus, CoopStatus};
use agentbox::prelude::*;

struct Go;

/// Enters `busy.inner` (a substate) on `Go`, then tells the test.
struct Switcher {
    inner: State,
    done: mpsc::Sender<()>,
}
impl Agent for Switcher {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.set_name("switcher").unwrap();
        ctx.subscribe_self().event(|a: &mut Self, ctx, _: &Go| {
            let s = a.inner.clone();
            ctx.change_state(&s).unwrap();
            a.done.send(()).unwrap();
        })?;
        Ok(())
    }
}

struct Plain;
impl Agent for Plain {}

#[test]
fn the_snapshot_lists_coops_parents_first_with_agent_types_states_and_statuses() {
    Environment::launch(|env| {
        let (tx, rx) = mpsc::channel();
        let busy = State::new("busy");
        let inner = busy.substate("inner").unwrap();
        let mut coop = env.make_coop();
        let switcher = coop.add_agent(Switcher { inner, done: tx });
        coop.add_agent(Plain);
        let parent = env.register_coop(coop).unwrap();
        env.introduce_child_coop(&parent, |c| {
            c.add_agent(Plain);
        })
        .unwrap();

        let snap = env.introspect();
        assert_eq!(snap.coops.len(), 2);
        let (top, child) = (&snap.coops[0], &snap.coops[1]);
        assert_eq!(top.parent, None);
        assert_eq!(child.parent, Some(top.id));
        assert_eq!(top.status, CoopStatus::Registered);
        assert_eq!(top.agents.len(), 2);
        assert_eq!(top.agents[0].status, AgentStatus::Active);
        // Names (set by the agent) are shown with or without the feature.
        assert_eq!(top.agents[0].name.as_deref(), Some("switcher"));
        assert_eq!(top.agents[1].name, None);
        // Type names and states are kept with the feature `monitor` only.
        let monitor = cfg!(feature = "monitor");
        if monitor {
            assert!(top.agents[0].type_name.unwrap().ends_with("::Switcher"));
            assert!(top.agents[1].type_name.unwrap().ends_with("::Plain"));
            assert_eq!(top.agents[0].state.as_deref(), Some("<default>"));
        } else {
            assert_eq!(top.agents[0].type_name, None);
            assert_eq!(top.agents[0].state, None);
        }
        assert_eq!(top.agents[0].id.as_u64(), switcher.id().as_u64());
        assert_eq!(snap.named_mboxes, 0);

        send(&switcher, Go).unwrap();
        rx.recv_timeout(Duration::from_secs(30)).unwrap();
        // Published at the switch, which `change_state` only asks for: it happens when the
        // handler returns, after its message to the test (so the test waits for it).
        if monitor {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let state = env.introspect().coops[0].agents[0].state.clone();
                if state.as_deref() == Some("inner") {
                    break;
                }
                assert!(Instant::now() < deadline, "still {state:?} after 30 s");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while env.introspect().coops[0].agents[0].status != AgentStatus::Active {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(env.introspect().uptime > Duration::ZERO);
        env.stop();
    })
    .unwrap();
}

#[test]
fn quantities_come_from_the_dispatchers_whether_or_not_stats_are_on() {
    Environment::launch(|env| {
        env.introduce_coop(|c| {
            c.add_agent(Plain);
        })
        .unwrap();
        assert!(!env.stats_controller().is_on());
        let q = env.introspect().quantities;
        assert!(
            q.iter().any(|q| q.prefix.starts_with("disp/one_thread/")
                && q.suffix == "agent.count"
                && q.value == 1),
            "{q:?}"
        );
        env.stop();
    })
    .unwrap();
}

struct Note;

/// Subscribes to the mbox it is given.
struct Listener(Mbox);
impl Agent for Listener {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let from = self.0.clone();
        ctx.subscribe(&from).event(|_: &mut Self, _, _: &Note| {})?;
        Ok(())
    }
}

#[test]
fn named_mboxes_list_their_message_types_and_subscribers_with_the_monitor_feature() {
    use agentbox::environment::SinkInfo;
    Environment::launch(|env| {
        let notes = env.named_mbox("notes");
        let listener = {
            let mut coop = env.make_coop();
            let direct = coop.add_agent(Listener(notes.clone()));
            env.register_coop(coop).unwrap();
            direct.id().as_u64()
        };
        let snap = env.introspect();
        if cfg!(not(feature = "monitor")) {
            assert!(snap.mboxes.is_empty());
            env.stop();
            return;
        }
        let m = snap
            .mboxes
            .iter()
            .find(|m| m.name == "notes")
            .unwrap_or_else(|| panic!("no notes in {:?}", snap.mboxes));
        assert_eq!(m.namespace, None);
        assert!(m.multi_consumer);
        assert_eq!(m.id, notes.id());
        assert_eq!(m.subscriptions.len(), 1, "{m:?}");
        let s = &m.subscriptions[0];
        assert_eq!(s.message_type, std::any::type_name::<Note>());
        assert_eq!(s.subscribers.len(), 1, "{s:?}");
        match &s.subscribers[0].sink {
            SinkInfo::Agent(a) => assert_eq!(a.as_u64(), listener),
            other => panic!("not the agent: {other:?}"),
        }
        assert!(s.subscribers[0].subscribed);
        assert!(!s.subscribers[0].filtered);
        env.stop();
    })
    .unwrap();
}
