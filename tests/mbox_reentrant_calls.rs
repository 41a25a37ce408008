//! User code an mbox runs on the sender's thread (a delivery filter, a custom sink) may
//! subscribe to that same mbox, or register a coop whose agents do: the built-in mboxes
//! hold no lock while it runs. Subscribers added during a send get the later sends.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentbox::prelude::*;
use agentbox::{
    DeliveryMode, MboxId, Message, MessageSink, MultiSinkBinding, RedirectionDepth, Sink,
};
use common::{within_patience, Log, PATIENCE};

/// Logs every `u32` from `from` as `"<tag> <n>"`.
struct Listener {
    from: Mbox,
    tag: &'static str,
    log: Log,
}

impl Agent for Listener {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe(&self.from)
            .event(|a: &mut Self, _, n: &u32| a.log.push(format!("{} {n}", a.tag)))?;
        Ok(())
    }
}

fn wait_for(log: &Log, n: usize) {
    let deadline = Instant::now() + PATIENCE;
    while log.len() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn sorted(log: &Log) -> Vec<String> {
    let mut v = log.get();
    v.sort();
    v
}

/// The filter registers, on its first call, a coop whose agent subscribes to the mbox the
/// filter is on: the send in progress returns (it used to wait for good for the table's
/// write lock it held for reading), and the new agent gets the next send.
#[test]
fn a_filter_that_subscribes_a_new_agent_to_its_own_mbox_does_not_block_the_sender() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let news = env.create_mbox();
            let (n2, e2, l2) = (news.clone(), env.clone(), l.clone());
            let spawned = AtomicBool::new(false);
            env.introduce_coop(|coop| {
                coop.add_agent(common::Script::new(&l).setup(move |_, ctx| {
                    ctx.subscribe(&n2)
                        .event(|s: &mut common::Script, _, n: &u32| {
                            s.log.push(format!("first {n}"))
                        })?;
                    let mbox = n2.clone();
                    ctx.set_delivery_filter(&n2, move |_: &u32| {
                        if !spawned.swap(true, Ordering::SeqCst) {
                            let (from, log) = (mbox.clone(), l2.clone());
                            e2.introduce_coop(|coop| {
                                coop.add_agent(Listener {
                                    from,
                                    tag: "second",
                                    log,
                                });
                            })
                            .unwrap();
                        }
                        true
                    })?;
                    Ok(())
                }));
            })
            .unwrap();
            send(&news, 1u32).unwrap();
            send(&news, 2u32).unwrap();
            wait_for(&l, 3);
            env.stop();
        })
        .unwrap();
        assert_eq!(sorted(&log), ["first 1", "first 2", "second 2"]);
    });
}

/// A custom sink that binds a second sink to the mbox that is delivering to it.
struct Spawner {
    source: Mbox,
    late: Arc<dyn MessageSink>,
    bound: AtomicBool,
    seen: Log,
}

impl MessageSink for Spawner {
    fn push(&self, _: MboxId, msg: Message, _: RedirectionDepth, _: DeliveryMode) {
        if let Some(n) = msg.downcast_ref::<u32>() {
            self.seen.push(format!("spawner {n}"));
        }
        if !self.bound.swap(true, Ordering::SeqCst) {
            let binding = MultiSinkBinding::new();
            binding
                .bind::<u32>(&self.source, Sink::custom(self.late.clone()))
                .unwrap();
            std::mem::forget(binding); // stays bound for the test
        }
    }
}

struct Late(Log);

impl MessageSink for Late {
    fn push(&self, _: MboxId, msg: Message, _: RedirectionDepth, _: DeliveryMode) {
        if let Some(n) = msg.downcast_ref::<u32>() {
            self.0.push(format!("late {n}"));
        }
    }
}

#[test]
fn a_custom_sink_may_bind_to_the_mbox_that_delivers_to_it() {
    within_patience(|| {
        let log = Log::new();
        let l = log.clone();
        Environment::launch(move |env| {
            let source = env.create_mbox();
            let spawner = Arc::new(Spawner {
                source: source.clone(),
                late: Arc::new(Late(l.clone())),
                bound: AtomicBool::new(false),
                seen: l.clone(),
            });
            let binding = MultiSinkBinding::new();
            binding.bind::<u32>(&source, Sink::custom(spawner)).unwrap();
            send(&source, 1u32).unwrap();
            send(&source, 2u32).unwrap();
            drop(binding);
            env.stop();
        })
        .unwrap();
        assert_eq!(sorted(&log), ["late 2", "spawner 1", "spawner 2"]);
    });
}
