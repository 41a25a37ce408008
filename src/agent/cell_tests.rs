use std::sync::atomic::AtomicUsize;

use super::*;
use crate::agent::DefineError;
use crate::dispatcher::Run;

/// A header that counts its drops.
struct Head(Arc<AtomicUsize>, AtomicU8);
impl Header for Head {
    fn exec_state(&self) -> &AtomicU8 {
        &self.1
    }
}
impl Drop for Head {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// An executor that counts its drops and may hold its own block (as an agent holding
/// its own mbox does).
struct Exec {
    drops: Arc<AtomicUsize>,
    me: ThinWeak<Head>,
    held: Option<ThinArc<Head>>,
    runs: u32,
}
impl Drop for Exec {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}
impl AgentExec for Exec {
    fn execute(&mut self, _: &crate::agent::AgentArc, _: Run<'_>) -> bool {
        self.runs += 1;
        false
    }
    fn define(&mut self) -> Result<(), DefineError> {
        self.runs += 1;
        Ok(())
    }
    fn discard(&mut self) {}
}

fn block() -> (
    ThinArc<Head>,
    ExecBox<Head>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
) {
    let (heads, execs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let e = execs.clone();
    let (arc, exec) = ThinArc::new(Head(heads.clone(), new_exec_state()), |me| Exec {
        drops: e,
        me,
        held: None,
        runs: 0,
    });
    (arc, exec, heads, execs)
}

fn count(c: &AtomicUsize) -> usize {
    c.load(Ordering::SeqCst)
}

#[test]
fn the_executor_is_dropped_by_its_owner_and_the_block_by_its_last_reference() {
    let (arc, mut exec, heads, execs) = block();
    assert_eq!(std::mem::size_of::<ThinArc<Head>>(), 8);
    exec.define().unwrap();
    let weak = arc.downgrade();
    let again = weak.upgrade().expect("alive");
    assert!(ThinArc::ptr_eq(&arc, &again));
    drop(again);
    drop(exec);
    assert_eq!((count(&execs), count(&heads)), (1, 0), "the executor only");
    let other = arc.clone();
    drop(arc);
    assert_eq!(count(&heads), 0);
    drop(other);
    assert_eq!((count(&execs), count(&heads)), (1, 1), "each once");
    assert!(weak.upgrade().is_none());
}

#[test]
fn a_handed_over_executor_is_taken_once_or_dropped_with_the_block() {
    let (arc, exec, heads, execs) = block();
    assert!(arc.take_over().is_none(), "not handed over yet");
    exec.hand_over();
    let mut taken = arc.take_over().expect("once");
    assert!(arc.take_over().is_none(), "and only once");
    let me = std::thread::scope(|s| {
        s.spawn(move || {
            taken.define().unwrap();
            let me = exec_of(&mut taken).me.clone();
            assert_eq!(exec_of(&mut taken).runs, 1);
            me
        })
        .join()
        .unwrap()
    });
    assert_eq!(count(&execs), 1, "dropped on the other thread");
    assert!(me.upgrade().is_some());
    drop(arc);
    assert_eq!(count(&heads), 1);
    assert!(me.upgrade().is_none());

    let (arc, exec, heads, execs) = block();
    exec.hand_over();
    drop(arc);
    assert_eq!(
        (count(&execs), count(&heads)),
        (1, 1),
        "never taken: dropped with the block"
    );
}

#[test]
fn an_executor_holding_its_own_block_is_freed_once_taken_and_dropped() {
    let (arc, mut exec, heads, execs) = block();
    // As an agent that keeps its own mbox: the executor holds its block.
    exec_of(&mut exec).held = Some(arc.clone());
    let weak = arc.downgrade();
    drop(arc);
    exec.hand_over();
    assert_eq!(count(&heads), 0, "kept alive by itself");
    let core = weak.upgrade().unwrap();
    drop(core.take_over());
    drop(core);
    assert_eq!((count(&execs), count(&heads)), (1, 1));
    assert!(weak.upgrade().is_none());
}

/// The test's executor, through its owner.
fn exec_of(exec: &mut ExecBox<Head>) -> &mut Exec {
    let cell = exec.cell();
    // SAFETY: the executor is an `Exec` (made by `block`), and `exec` is its one owner,
    // borrowed mutably.
    unsafe { &mut *(cell as *mut ManuallyDrop<Exec>) }
}

#[test]
fn a_set_once_cell_is_set_once_and_read_anywhere_and_drops_its_value() {
    let drops = Arc::new(AtomicUsize::new(0));
    let cell = SetOnce::new();
    assert!(cell.get().is_none());
    assert!(cell.set(Head(drops.clone(), new_exec_state())).is_ok());
    let again = cell.set(Head(drops.clone(), new_exec_state()));
    assert!(again.is_err(), "set once");
    drop(again);
    assert_eq!(count(&drops), 1, "the refused value came back");
    std::thread::scope(|s| {
        s.spawn(|| assert!(cell.get().is_some()));
    });
    drop(cell);
    assert_eq!(count(&drops), 2);
    let unset: SetOnce<Head> = SetOnce::new();
    drop(unset);
    assert_eq!(count(&drops), 2);

    // Set on one thread while another waits to read it.
    let cell = Arc::new(SetOnce::new());
    let c = cell.clone();
    let reader = std::thread::spawn(move || loop {
        if let Some(v) = c.get() {
            return *v;
        }
        std::thread::yield_now();
    });
    cell.set(7u64).unwrap();
    assert_eq!(reader.join().unwrap(), 7);
}
