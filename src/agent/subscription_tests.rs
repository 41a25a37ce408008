//! The handler cache (`Subscriptions::last`) never outlives what it caches: messages
//! already queued meet the index and the state as they are when they come up.

use std::sync::{Arc, Mutex};

use crate::prelude::*;

type Log = Arc<Mutex<Vec<String>>>;

/// Five numbers are queued before the first runs, the agent then in state `other`.
/// `in_other` takes 1 and switches to the default state, where `first` takes 2 and
/// swaps itself for `second`, which takes 3 and 4 and then drops the subscription: 5
/// finds no handler.
struct Swapper {
    log: Log,
    other: State,
}

fn first(a: &mut Swapper, ctx: &mut Context<Swapper>, n: &u32) {
    a.log.lock().unwrap().push(format!("first {n}"));
    let me = ctx.direct_mbox();
    let default = ctx.default_state().clone();
    assert!(ctx.unsubscribe::<u32>(&me, &default));
    ctx.subscribe_self().event(second).unwrap();
}

fn second(a: &mut Swapper, ctx: &mut Context<Swapper>, n: &u32) {
    a.log.lock().unwrap().push(format!("second {n}"));
    if *n == 4 {
        let me = ctx.direct_mbox();
        let default = ctx.default_state().clone();
        assert!(ctx.unsubscribe::<u32>(&me, &default));
    }
}

impl Agent for Swapper {
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        ctx.subscribe_self().event(first)?;
        let other = self.other.clone();
        ctx.subscribe_self()
            .in_state(&other)
            .event(|a: &mut Self, ctx, n: &u32| {
                a.log.lock().unwrap().push(format!("in_other {n}"));
                let default = ctx.default_state().clone();
                ctx.change_state(&default).unwrap();
            })?;
        ctx.subscribe_self()
            .event(|_: &mut Self, ctx, _: &&'static str| {
                ctx.deregister_coop(DeregReason::Normal)
            })?;
        Ok(())
    }

    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.direct_mbox();
        for n in 1..=5u32 {
            send(&me, n).unwrap();
        }
        send(&me, "done").unwrap();
        let other = self.other.clone();
        ctx.change_state(&other).unwrap();
    }
}

/// Without the cache emptied by a state switch, 2 would go to `in_other`; without it
/// emptied by an unsubscription, 3 would go to `first`'s emptied slot (and be lost)
/// and 5 to `second`. The `&str` meets the cached `u32` handler first, which declines
/// it.
#[test]
#[cfg_attr(
    miri,
    ignore = "parking_lot_core's futex syscall is rejected by current miri"
)]
fn a_changed_index_or_state_reaches_messages_already_queued() {
    let log: Log = Arc::default();
    let seen = log.clone();
    let no_handler = crate::test_support::within_patience(move || {
        let mut counts = None;
        Environment::launch(|env| {
            env.introduce_coop(|coop| {
                coop.add_agent(Swapper {
                    log: seen,
                    other: State::new("other"),
                });
            })
            .unwrap();
            counts = Some(env.clone());
        })
        .unwrap();
        counts.unwrap().drop_counts().no_handler
    });
    assert_eq!(
        *log.lock().unwrap(),
        ["in_other 1", "first 2", "second 3", "second 4"],
    );
    assert_eq!(no_handler, 1, "5 finds no handler in the default state");
}
