//! An event that arrives on a node with no codec for its type is loud: logged once per type
//! through the error logger (with the type number), counted in the session's stats; and
//! `register_remote_event!` + `InterconnectSetup::linked_events` register every linked type.

use std::net::TcpListener;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentbox::actors::*;
use agentbox::interconnect::{
    linked_events, Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde,
};
use agentbox::{ActorId, EnvParams, Environment};
use serde::{Deserialize, Serialize};

const PATIENCE: Duration = Duration::from_secs(60);
const SPACE: u32 = event_space_begin(ES_USERSPACE + 23);

/// Registered on node 1 only (explicitly): node 2 does not know it.
#[derive(Debug, Serialize, Deserialize)]
struct Unknown(u32);
impl Event for Unknown {
    const EVENT_TYPE: u32 = SPACE + 1;
}
impl RemoteEvent for Unknown {
    type Codec = Serde;
}

/// Submitted with the macro: any node that calls `linked_events` knows it.
#[derive(Debug, Serialize, Deserialize)]
struct Linked(u32);
impl Event for Linked {
    const EVENT_TYPE: u32 = SPACE + 2;
}
impl RemoteEvent for Linked {
    type Codec = Serde;
}
agentbox::register_remote_event!(Linked);

/// What node 2's actor saw of each event: (type, `is::<Unknown>`, `is::<Linked>`, value,
/// bytes kept).
type Seen = (u32, bool, bool, Option<u32>, bool);

struct Recorder(Sender<Seen>);
impl Actor for Recorder {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::serving);
    }
}
impl Recorder {
    fn serving(&mut self, _: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let value = ev
            .get::<Linked>()
            .map(|l| l.0)
            .or(ev.get::<Unknown>().map(|u| u.0));
        let _ = self.0.send((
            ev.event_type(),
            ev.is::<Unknown>(),
            ev.is::<Linked>(),
            value,
            ev.serialized_bytes().is_some(),
        ));
        Handled::Yes
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_event_without_a_codec_is_logged_once_per_type_and_counted() {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = lines.clone();
    let params = EnvParams::new().error_logger(move |l| log.lock().unwrap().push(l.to_owned()));
    let (tx, rx) = channel();
    let mut seen = Vec::new();
    let mut node2_stats = None;
    Environment::launch_with(params, |env| {
        let (l1, l2) = (
            TcpListener::bind("127.0.0.1:0").unwrap(),
            TcpListener::bind("127.0.0.1:0").unwrap(),
        );
        let names = NameService::new()
            .node(
                1,
                NodeAddress::new("127.0.0.1", l1.local_addr().unwrap().port()),
            )
            .node(
                2,
                NodeAddress::new("127.0.0.1", l2.local_addr().unwrap().port()),
            );
        let s1 = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
        let s2 = ActorSystem::start(env, SystemSetup::new(2)).unwrap();
        let setup1 = InterconnectSetup::new(names.clone())
            .listener(l1)
            .event::<Unknown>()
            .linked_events();
        // Node 2 registers only the linked types: `Unknown` is not among them.
        let setup2 = InterconnectSetup::new(names).listener(l2).linked_events();
        Interconnect::start(&s1, setup1).unwrap();
        let ic2 = Interconnect::start(&s2, setup2).unwrap();
        let recorder = s2.register(Recorder(tx)).unwrap();
        for n in 0..3 {
            s1.send(recorder, Unknown(n));
        }
        s1.send(recorder, Linked(7));
        for _ in 0..4 {
            seen.push(rx.recv_timeout(PATIENCE).expect("node 2 gets every event"));
        }
        wait_for("the count", || {
            ic2.session_stats(1)
                .is_some_and(|s| s.events_without_codec == 3)
        });
        node2_stats = ic2.session_stats(1);
        env.stop();
    })
    .unwrap();

    // The three unknown ones reach the handler as bytes, never as the type.
    for s in &seen[..3] {
        assert_eq!(*s, (Unknown::EVENT_TYPE, false, false, None, true));
    }
    // The linked one decodes.
    assert_eq!(seen[3], (Linked::EVENT_TYPE, false, true, Some(7), true));
    let stats = node2_stats.unwrap();
    assert_eq!((stats.events_in, stats.events_without_codec), (4, 3));
    // One line for the type, however many events, naming the type number.
    let lines = lines.lock().unwrap();
    let about: Vec<_> = lines
        .iter()
        .filter(|l| l.contains(&format!("{:#x}", Unknown::EVENT_TYPE)))
        .collect();
    assert_eq!(about.len(), 1, "{lines:?}");
    assert!(about[0].contains("no codec"), "{}", about[0]);
    assert!(
        !lines
            .iter()
            .any(|l| l.contains(&format!("{:#x}", Linked::EVENT_TYPE))),
        "{lines:?}"
    );
}

#[test]
fn linked_events_lists_the_submitted_types() {
    let linked: Vec<_> = linked_events()
        .filter(|l| l.event_type() == Linked::EVENT_TYPE)
        .collect();
    assert_eq!(linked.len(), 1);
    assert!(linked[0].type_name().ends_with("Linked"));
    assert!(!linked_events().any(|l| l.event_type() == Unknown::EVENT_TYPE));
}
