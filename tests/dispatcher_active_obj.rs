//! The behavioural suite on `active_obj`, plus its own rules: a thread per agent, joined
//! when the agent is unbound.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use agentbox::dispatcher::active_obj;
use agentbox::prelude::*;
use common::{within_patience, Log, Script};
use parking_lot::Mutex;

dispatcher_suite!(suite, |_env| {
    agentbox::dispatcher::active_obj::Builder::new()
        .build()
        .expect("build active_obj")
        .binder()
});

#[test]
fn every_agent_runs_on_a_thread_of_its_own() {
    within_patience(|| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        Environment::launch(move |env| {
            let disp = active_obj::Builder::new().name("own").build().unwrap();
            env.introduce_coop(|coop| {
                coop.set_binder(disp.binder());
                for i in 0..4 {
                    let s = s.clone();
                    coop.add_agent(Script::new(&Log::new()).start(move |_, ctx| {
                        s.lock().push((
                            std::thread::current().id(),
                            std::thread::current().name().map(str::to_owned),
                        ));
                        if i == 3 {
                            ctx.deregister_coop(DeregReason::Normal);
                        }
                    }));
                }
            })
            .unwrap();
        })
        .unwrap();
        let seen = seen.lock();
        assert_eq!(seen.len(), 4);
        let ids: HashSet<_> = seen.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), 4, "four agents, four threads");
        assert!(ids.iter().all(|id| *id != std::thread::current().id()));
        assert!(seen
            .iter()
            .all(|(_, n)| n.as_deref().is_some_and(|n| n.starts_with("own-"))));
    });
}

/// Releases its token slowly as its thread exits: a join waits for that, a detached
/// thread would not be waited for (the test then sees the token still held).
struct SlowRelease(Option<Arc<()>>);
impl Drop for SlowRelease {
    fn drop(&mut self) {
        if self.0.is_some() {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

thread_local! {
    /// Released only when the thread that set it exits.
    static HELD: std::cell::RefCell<SlowRelease> = const { std::cell::RefCell::new(SlowRelease(None)) };
}

#[test]
fn an_agents_thread_is_joined_when_it_is_unbound() {
    within_patience(|| {
        // Each agent parks a clone of the token in a thread-local of its own thread; it is
        // released when that thread exits. `launch` returns after the last coop is final,
        // and a coop is final after its agents' threads were joined: no clone may remain.
        let token = Arc::new(());
        let t = token.clone();
        Environment::launch(move |env| {
            let disp = active_obj::Builder::new().build().unwrap();
            for _ in 0..3 {
                let t = t.clone();
                env.introduce_coop(|coop| {
                    coop.set_binder(disp.binder());
                    coop.add_agent(Script::new(&Log::new()).start(move |_, ctx| {
                        HELD.with_borrow_mut(|h| h.0 = Some(t));
                        ctx.deregister_coop(DeregReason::Normal);
                    }));
                })
                .unwrap();
            }
        })
        .unwrap();
        assert_eq!(Arc::strong_count(&token), 1);
    });
}
