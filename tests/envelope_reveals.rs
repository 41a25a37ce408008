//! An envelope is asked to reveal its message for handling once per delivery: when a
//! handler was found and is about to be called (`Access::Handling`), never for a handler
//! that is not the message's. Envelopes with side effects (first to reveal handles it,
//! counting, timestamps) rely on it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::prelude::*;
use agentbox::{Access, Envelope, Message};
use common::{with_env, Log};

/// Counts the reveals it is asked for handling.
struct Counting(Arc<AtomicUsize>);

impl Envelope for Counting {
    fn reveal(&self, access: Access) -> bool {
        if access == Access::Handling {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        true
    }
}

struct Two {
    log: Log,
}

impl Agent for Two {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &u64| a.log.push(format!("u64 {v}")))?;
        ctx.subscribe_self()
            .event(|a: &mut Self, _, v: &String| a.log.push(format!("string {v}")))?;
        Ok(())
    }
}

#[test]
fn an_enveloped_message_is_revealed_once_for_handling_whatever_came_before() {
    let reveals = Arc::new(AtomicUsize::new(0));
    let seen = reveals.clone();
    let log = Log::new();
    let got = log.clone();
    let waits = log.clone();
    with_env(move |env| {
        let target = env
            .introduce_coop(|coop| coop.add_agent(Two { log: got }))
            .unwrap();
        // Plain messages first (the agent's last handler is then the u64 one), then
        // enveloped ones of the other type and of the same type.
        target.send(1u64).unwrap();
        target.send(2u64).unwrap();
        let wrap = |m: Message| Message::enveloped(m, Counting(seen.clone()));
        target
            .deliver(wrap(Message::new(String::from("a"))), 0)
            .unwrap();
        target.send(3u64).unwrap();
        target.deliver(wrap(Message::new(4u64)), 0).unwrap();
        target
            .deliver(wrap(Message::new(String::from("b"))), 0)
            .unwrap();
        waits.wait_for(6);
    });
    assert_eq!(
        log.get(),
        ["u64 1", "u64 2", "string a", "u64 3", "u64 4", "string b"]
    );
    assert_eq!(
        reveals.load(Ordering::SeqCst),
        3,
        "one reveal for handling per enveloped message"
    );
}
