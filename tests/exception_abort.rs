//! The environment's default exception reaction aborts the process. Checked in a child
//! process: this test binary runs itself with `AGENTBOX_ABORT_CHILD` set.

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
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env("AGENTBOX_ABORT_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stdout.contains("NOT ABORTED"), "{stdout}");
    assert!(stderr.contains("aborting the process"), "{stderr}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(6),
            "SIGABRT expected: {:?}",
            out.status
        );
    }
}
