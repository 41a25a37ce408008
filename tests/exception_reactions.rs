//! Panics in `on_start` and `on_finish` are caught too, and the inheritance chain ends at
//! the environment's reaction.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentbox::prelude::*;
use agentbox::EnvParams;
use common::{coop_notice, within_patience, Log, Recorder};

struct FailsAt {
    start: bool,
    finish: bool,
    finished: Arc<AtomicUsize>,
    reaction: ExceptionReaction,
}

impl Agent for FailsAt {
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        if self.start {
            panic!("on_start failed");
        }
        ctx.deregister_coop(DeregReason::Normal);
    }
    fn on_finish(&mut self, _ctx: &mut Context<Self>) {
        self.finished.fetch_add(1, Ordering::SeqCst);
        if self.finish {
            panic!("on_finish failed");
        }
    }
    fn exception_reaction(&self) -> ExceptionReaction {
        self.reaction
    }
}

fn run(agent: FailsAt, env_reaction: ExceptionReaction) -> (Vec<String>, Vec<String>) {
    within_patience(move || {
        let errors = Log::new();
        let e = errors.clone();
        let (notes, seen) = Recorder::mbox(coop_notice);
        let params = EnvParams::new()
            .exception_reaction(env_reaction)
            .error_logger(move |l| e.push(l));
        Environment::launch_with(params, move |env| {
            let mut coop = env.make_coop();
            coop.add_dereg_notificator(&notes).add_agent(agent);
            env.register_coop(coop).unwrap();
        })
        .unwrap();
        (seen.get(), errors.get())
    })
}

#[test]
fn a_panic_in_on_start_deregisters_the_coop_and_on_finish_still_runs() {
    let finished = Arc::new(AtomicUsize::new(0));
    let agent = FailsAt {
        start: true,
        finish: false,
        finished: finished.clone(),
        reaction: ExceptionReaction::DeregisterCoop,
    };
    let (notes, errors) = run(agent, ExceptionReaction::Abort);
    assert_eq!(notes, ["dereg Panic"]);
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("on_start failed"), "{errors:?}");
    // The log line names the hook, not "a handler".
    assert!(errors[0].contains("failed in on_start"), "{errors:?}");
}

#[test]
fn a_panic_in_on_finish_is_caught_and_the_coop_still_completes() {
    let finished = Arc::new(AtomicUsize::new(0));
    let agent = FailsAt {
        start: false,
        finish: true,
        finished: finished.clone(),
        reaction: ExceptionReaction::Ignore,
    };
    let (notes, errors) = run(agent, ExceptionReaction::Abort);
    assert_eq!(notes, ["dereg Normal"]);
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert!(errors[0].contains("on_finish failed"), "{errors:?}");
    assert!(errors[0].contains("failed in on_finish"), "{errors:?}");
}

#[test]
fn an_inherited_reaction_ends_at_the_environments() {
    let finished = Arc::new(AtomicUsize::new(0));
    let agent = FailsAt {
        start: true,
        finish: false,
        finished: finished.clone(),
        reaction: ExceptionReaction::Inherit,
    };
    // Agent and coop inherit; the environment says shut down.
    let (notes, errors) = run(agent, ExceptionReaction::ShutdownEnvironment);
    assert_eq!(notes, ["dereg Shutdown"]);
    assert!(errors[0].contains("ShutdownEnvironment"), "{errors:?}");
}
