//! `agentbox::stfunc!`: events go to the first arm of their type, in order; the arms pass
//! what they say (the handle, the event by value, nothing); an event no arm takes falls
//! through to `unhandled` (a dead letter; a Poison passes the actor away).

use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

use agentbox::actors::*;
use agentbox::{ActorId, Environment};

const PATIENCE: Duration = Duration::from_secs(60);
const EVENTS: u32 = event_space_begin(ES_USERSPACE + 31);

struct Note(u32);
impl Event for Note {
    const EVENT_TYPE: u32 = EVENTS + 1;
}
struct Tick;
impl Event for Tick {
    const EVENT_TYPE: u32 = EVENTS + 2;
}
struct Ignored;
impl Event for Ignored {
    const EVENT_TYPE: u32 = EVENTS + 3;
}
struct Stranger;
impl Event for Stranger {
    const EVENT_TYPE: u32 = EVENTS + 4;
}
struct Flip;
impl Event for Flip {
    const EVENT_TYPE: u32 = EVENTS + 5;
}

#[derive(Debug, PartialEq)]
enum Seen {
    Handle(u32, u64),
    Event(u32, u64),
    Tick,
    Flip,
    Finished,
}

struct Subject {
    out: Sender<Seen>,
}

impl Actor for Subject {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
        ctx.become_state(Self::first);
    }
}

impl Drop for Subject {
    fn drop(&mut self) {
        let _ = self.out.send(Seen::Finished);
    }
}

impl Subject {
    /// `Note` by handle (the first arm of its type wins over the later `efunc`).
    fn first(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        agentbox::stfunc!(self, ctx, ev => {
            hfunc(Note, Self::note_handle),
            efunc(Note, Self::note_event),
            cfunc(Tick, Self::tick),
            ignore(Ignored),
            hfunc(Flip, Self::flip),
        })
    }

    /// `Note` by value; `Tick` and everything else unhandled.
    fn second(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        agentbox::stfunc!(self, ctx, ev => { efunc(Note, Self::note_event) })
    }

    fn note_handle(&mut self, _: &mut ActorContext<Self>, mut ev: EventHandle) {
        let n = ev.take::<Note>().expect("the arm's type").0;
        self.out.send(Seen::Handle(n, ev.cookie())).unwrap();
    }

    fn note_event(&mut self, _: &mut ActorContext<Self>, note: Note, ev: &EventHandle) {
        assert!(ev.get::<Note>().is_none(), "taken out");
        self.out.send(Seen::Event(note.0, ev.cookie())).unwrap();
    }

    fn tick(&mut self, _: &mut ActorContext<Self>) {
        self.out.send(Seen::Tick).unwrap();
    }

    fn flip(&mut self, ctx: &mut ActorContext<Self>, _: EventHandle) {
        self.out.send(Seen::Flip).unwrap();
        ctx.become_state(Self::second);
    }
}

#[test]
fn events_reach_their_arms_in_order_and_the_rest_falls_through_to_unhandled() {
    let (tx, rx) = channel();
    let mut stats = None;
    Environment::launch(|env| {
        let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
        let subject = system.register(Subject { out: tx }).unwrap();
        let none = ActorId::EMPTY;
        system.send_with(subject, none, Note(1), EventFlags::empty(), 11);
        system.send(subject, Tick);
        system.send(subject, Ignored); // handled, nothing runs
        system.send(subject, Stranger); // no arm: a dead letter
        system.send(subject, Flip);
        system.send_with(subject, none, Note(2), EventFlags::empty(), 22);
        system.send(subject, Tick); // no arm in `second`: a dead letter
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(rx.recv_timeout(PATIENCE).unwrap());
        }
        assert_eq!(
            seen,
            [
                Seen::Handle(1, 11),
                Seen::Tick,
                Seen::Flip,
                Seen::Event(2, 22)
            ]
        );
        // A Poison no arm takes passes the actor away.
        system.send(subject, Poison);
        assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), Seen::Finished);
        stats = Some(system.stats());
    })
    .unwrap();
    // Stranger, and Tick in `second`.
    assert_eq!(stats.unwrap().dead_letters, 2);
}
