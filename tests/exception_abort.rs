//! The environment's default exception reaction aborts the process. Checked in a child
//! process: this test binary runs itself with `AGENTBOX_ABORT_CHILD` set.

mod common;

use agentbox::prelude::*;

struct Doomed;
impl Agent for Doomed {
    fn on_start(&mut self, _ctx: &mut Context<Self>) {
        panic!("nobody planned for this");
    }
}

#[test]
fn child_entry() {
    if std::env::var_os("AGENTBOX_ABORT_CHILD").is_none() {
        return; // only meaningful inside the child process
    }
    Environment::launch(|env| {
        env.introduce_coop(|coop| {
            coop.add_agent(Doomed);
        })
        .unwrap();
    })
    .unwrap();
    println!("NOT ABORTED");
}

#[test]
fn a_panic_with_the_default_reaction_aborts_the_process() {
    common::expect_child_abort("AGENTBOX_ABORT_CHILD", "aborting the process");
}
