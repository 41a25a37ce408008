//! The behavioural suite on `active_group`, plus its own rules: one thread per group name,
//! ended when the group's last agent leaves.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use agentbox::dispatcher::active_group;
use agentbox::prelude::*;
use agentbox::BindParams;
use common::{within_patience, Log, Script};
use parking_lot::Mutex;

dispatcher_suite!(one_group, |_env| {
    agentbox::dispatcher::active_group::Builder::new()
        .build()
        .expect("build active_group")
        .binder_with(agentbox::BindParams::new().group("suite"))
});

#[test]
fn agents_of_one_group_share_its_thread_and_groups_differ() {
    within_patience(|| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        Environment::launch(move |env| {
            let disp = active_group::Builder::new().name("g").build().unwrap();
            env.introduce_coop(|coop| {
                for (i, group) in ["x", "y", "x", "y", "x"].into_iter().enumerate() {
                    let s = s.clone();
                    coop.add_agent_with_binder(
                        Script::new(&Log::new()).start(move |_, ctx| {
                            let t = std::thread::current();
                            s.lock().push((group, t.id(), t.name().map(str::to_owned)));
                            if i == 4 {
                                ctx.deregister_coop(DeregReason::Normal);
                            }
                        }),
                        disp.binder_with(BindParams::new().group(group)),
                    );
                }
            })
            .unwrap();
        })
        .unwrap();
        let seen = seen.lock();
        assert_eq!(seen.len(), 5);
        let mut by_group: HashMap<&str, Vec<std::thread::ThreadId>> = HashMap::new();
        for (g, id, name) in seen.iter() {
            by_group.entry(g).or_default().push(*id);
            assert_eq!(name.as_deref(), Some(format!("g-{g}").as_str()));
        }
        for ids in by_group.values() {
            assert!(ids.iter().all(|id| *id == ids[0]), "one thread per group");
        }
        assert_ne!(by_group["x"][0], by_group["y"][0]);
    });
}

/// Releases its token slowly as its thread exits: a join waits for that.
struct SlowRelease(Option<Arc<()>>);
impl Drop for SlowRelease {
    fn drop(&mut self) {
        if self.0.is_some() {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

thread_local! {
    static HELD: std::cell::RefCell<SlowRelease> = const { std::cell::RefCell::new(SlowRelease(None)) };
}

/// Registers one agent on `binder` that parks `token` in a thread-local of its thread,
/// records the thread and deregisters; returns once its coop is final (after unbinding).
fn one_agent_round(
    env: &Environment,
    binder: &agentbox::Binder,
    token: &Arc<()>,
    threads: &Arc<Mutex<Vec<std::thread::ThreadId>>>,
) {
    let (t, th) = (token.clone(), threads.clone());
    env.introduce_coop(|coop| {
        coop.add_agent_with_binder(
            Script::new(&Log::new()).start(move |_, ctx| {
                HELD.with_borrow_mut(|h| h.0 = Some(t));
                th.lock().push(std::thread::current().id());
                ctx.deregister_coop(DeregReason::Normal);
            }),
            binder.clone(),
        );
    })
    .unwrap();
    while env.coop_count() > 0 {
        std::thread::yield_now();
    }
}

#[test]
fn a_groups_thread_ends_with_its_last_agent_and_a_new_one_starts_later() {
    within_patience(|| {
        let token = Arc::new(());
        let threads = Arc::new(Mutex::new(Vec::new()));
        let wrapped = agentbox::WrappedEnv::new(|_| {}).unwrap();
        let env = wrapped.environment().clone();
        let disp = active_group::Builder::new().build().unwrap();
        let binder = disp.binder_with(BindParams::new().group("solo"));
        one_agent_round(&env, &binder, &token, &threads);
        // The coop is final only after its agent's group thread was joined.
        assert_eq!(
            Arc::strong_count(&token),
            1,
            "the group's thread was joined"
        );
        one_agent_round(&env, &binder, &token, &threads);
        assert_eq!(Arc::strong_count(&token), 1);
        let threads = threads.lock();
        assert_ne!(
            threads[0], threads[1],
            "a new thread for the group's next agent"
        );
        wrapped.stop_then_join().unwrap();
    });
}
