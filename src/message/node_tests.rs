//! These run under miri too (`cargo +nightly miri test --lib message::`), which checks
//! the pointer arithmetic, the provenance of the tag and the frees.
use super::*;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

struct Counted(Arc<AtomicUsize>, u64);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
impl Payload for Counted {
    const MESSAGE_TYPE_ID: TypeId = TypeId::of::<u64>();
    fn message_type(&self) -> MessageType {
        MessageType::of::<u64>()
    }
}

struct Plain(u32);
impl Payload for Plain {
    const MESSAGE_TYPE_ID: TypeId = TypeId::of::<u32>();
    const REUSABLE: bool = true;
    fn message_type(&self) -> MessageType {
        MessageType::of::<u32>()
    }
}

#[test]
fn the_last_reference_drops_the_payload_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let a = NodePtr::new(Counted(drops.clone(), 7));
    let b = a.clone();
    assert!(!a.is_unique());
    assert_eq!(a.addr(), b.addr());
    drop(a);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    assert!(b.is_unique());
    assert_eq!(b.downcast::<Counted>().map(|c| c.1), Some(7));
    drop(b);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn copies_dropped_on_other_threads_free_the_node_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let node = NodePtr::new(Counted(drops.clone(), 1));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let copy = node.clone();
            std::thread::spawn(move || {
                let again = copy.clone();
                assert_eq!(again.downcast::<Counted>().map(|c| c.1), Some(1));
            })
        })
        .collect();
    drop(node);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_payload_is_reached_as_its_own_type_only() {
    let mut n = NodePtr::new(Plain(3));
    assert!(n.downcast::<Counted>().is_none());
    assert_eq!(n.message_type_id(), (TypeId::of::<u32>(), false));
    assert!(n.reusable());
    assert_eq!(n.message_type(), MessageType::of::<u32>());
    assert!(n.envelope().is_none());
    n.unique_mut::<Plain>().unwrap().0 = 4;
    assert_eq!(n.downcast::<Plain>().map(|p| p.0), Some(4));
    let copy = n.clone();
    assert!(n.unique_mut::<Plain>().is_none(), "shared: not mutable");
    drop(copy);
    assert!(n.unique_mut::<Counted>().is_none(), "another type");
    assert!(n.unique_mut::<Plain>().is_some());
}

#[test]
fn a_take_once_value_is_taken_once_and_dropped_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let slot = TakeOnce::new(Counted(drops.clone(), 1));
    assert_eq!(slot.take().map(|c| c.1), Some(1));
    assert!(slot.take().is_none());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(slot);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "nothing left to drop");
    let slot = TakeOnce::new(Counted(drops.clone(), 2));
    drop(slot);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        2,
        "an untaken value goes with its slot"
    );
    // Taken, then dropped: nothing dropped twice.
    let slot = TakeOnce::new(Counted(drops.clone(), 3));
    drop(slot.take());
    drop(slot);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    // Racing takers: one gets it.
    let slot = Arc::new(TakeOnce::new(Counted(drops.clone(), 4)));
    let takers: Vec<_> = (0..4)
        .map(|_| {
            let slot = slot.clone();
            std::thread::spawn(move || slot.take().map(|c| c.1))
        })
        .collect();
    let got: Vec<_> = takers
        .into_iter()
        .filter_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(got, [4]);
    drop(slot);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

#[test]
fn a_static_node_is_never_counted_nor_mutable() {
    // Kept where the process's signal nodes are kept: reachable from a static (miri's
    // leak check counts that memory as in use, not lost).
    static KEPT: std::sync::Mutex<Vec<NodePtr>> = std::sync::Mutex::new(Vec::new());
    let s = NodePtr::new_static(Plain(9));
    KEPT.lock().unwrap().push(s.clone());
    let copies: Vec<NodePtr> = (0..3).map(|_| s.clone()).collect();
    assert!(copies.iter().all(|c| c.addr() == s.addr()));
    assert_eq!(s.header().count.load(Ordering::SeqCst), 1, "never touched");
    let mut t = s.clone();
    assert!(!t.is_unique());
    assert!(t.unique_mut::<Plain>().is_none());
    assert_eq!(t.downcast::<Plain>().map(|p| p.0), Some(9));
    drop(copies);
    drop(s);
    assert_eq!(t.downcast::<Plain>().map(|p| p.0), Some(9));
}
