use super::*;
use std::sync::Arc;

fn payload_address(m: &Message) -> usize {
    m.node.addr()
}

fn same_payload(a: &Message, b: &Message) -> bool {
    payload_address(a) == payload_address(b)
}

#[test]
fn the_flavour_comes_from_the_constructor() {
    assert!(!MessageType::of::<String>().is_mutable());
    assert!(MessageType::of_mutable::<String>().is_mutable());
    assert_eq!(
        MessageType::of_mutable::<String>(),
        MessageType::named::<Mutable<String>>()
    );
    assert_ne!(
        MessageType::of_mutable::<String>(),
        MessageType::of::<String>()
    );
}

#[test]
fn a_signal_is_a_shared_payload_and_data_is_not() {
    #[derive(Debug, PartialEq)]
    struct Tick;
    let (a, b) = (Message::new(Tick), Message::new(Tick));
    assert!(same_payload(&a, &b), "one payload per process");
    let from_another_thread = std::thread::spawn(|| Message::new(Tick)).join().unwrap();
    assert!(same_payload(&a, &from_another_thread));
    assert_eq!(a.type_id(), TypeId::of::<Tick>());
    assert_eq!(b.downcast_ref::<Tick>(), Some(&Tick));
    // Another signal type has its own payload; a type with data is never shared.
    struct Tock;
    let c = Message::new(Tock);
    assert_eq!(c.type_id(), TypeId::of::<Tock>());
    assert!(c.downcast_ref::<Tick>().is_none());
    let (x, y) = (Message::new(1u8), Message::new(1u8));
    assert!(!same_payload(&x, &y));
    // A unit struct with `Drop` is not a signal: each message drops its own value.
    struct Noisy;
    impl Drop for Noisy {
        fn drop(&mut self) {}
    }
    let (n1, n2) = (Message::new(Noisy), Message::new(Noisy));
    assert!(!same_payload(&n1, &n2));
    assert_eq!(std::mem::size_of::<Message>(), 8);
    assert_eq!(std::mem::size_of::<Option<Message>>(), 8);
}

#[test]
fn a_spent_payload_is_refilled_only_when_nothing_else_sees_it() {
    // Spent and unreferenced: the next message of its type reuses it.
    let m = Message::new(5u64);
    let first = payload_address(&m);
    m.recycle();
    let n = Message::new(7u64);
    assert_eq!(payload_address(&n), first, "reused");
    assert_eq!(n.downcast_ref::<u64>(), Some(&7));
    // A copy still held elsewhere (another receiver): never refilled under it.
    let kept = n.clone();
    n.recycle();
    let o = Message::new(9u64);
    assert_eq!(kept.downcast_ref::<u64>(), Some(&7));
    assert_eq!(o.downcast_ref::<u64>(), Some(&9));
    // A spent payload of another type is not taken for this one.
    o.recycle();
    let p = Message::new(3u32);
    assert_eq!(p.downcast_ref::<u32>(), Some(&3));
    assert_eq!(p.type_id(), TypeId::of::<u32>());
    let q = Message::new(4u64);
    assert_eq!(q.downcast_ref::<u64>(), Some(&4));
    // Types with `Drop` are never kept: their value is dropped with the last copy.
    let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    struct Counted(Arc<std::sync::atomic::AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    Message::new(Counted(dropped.clone())).recycle();
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_mutable_message_made_in_place_or_taken_by_its_owner_is_taken_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Counted(Arc<AtomicUsize>, u32);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    // Made after its block is taken: the same message as `new_mutable`'s.
    let mut m = Message::new_mutable_with(|| Counted(drops.clone(), 1));
    assert_eq!(m.message_type(), MessageType::of_mutable::<Counted>());
    assert_eq!(m.handler_take_owned::<String>(), None, "another type");
    // The only reference: taken without the swap, once.
    assert_eq!(m.handler_take_owned::<Counted>().map(|c| c.1), Some(1));
    assert_eq!(m.handler_take_owned::<Counted>().map(|c| c.1), None);
    assert_eq!(m.take_mutable::<Counted>().map(|c| c.1), None);
    drop(m);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "dropped once, by its taker"
    );
    // A copy exists: the shared path, still once between the two.
    let mut n = Message::new_mutable_with(|| Counted(drops.clone(), 2));
    let copy = n.clone();
    assert_eq!(n.handler_take_owned::<Counted>().map(|c| c.1), Some(2));
    assert_eq!(copy.take_mutable::<Counted>().map(|c| c.1), None);
    drop((n, copy));
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    // Taken through the shared path first: the owner's take finds nothing.
    let mut o = Message::new_mutable_with(|| Counted(drops.clone(), 3));
    assert_eq!(o.take_mutable::<Counted>().map(|c| c.1), Some(3));
    assert_eq!(o.handler_take_owned::<Counted>().map(|c| c.1), None);
    // Never taken: dropped with the message, once.
    let p = Message::new_mutable_with(|| Counted(drops.clone(), 4));
    drop((o, p));
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    // Enveloped: the owner's take reaches the value through the envelope.
    struct Open;
    impl Envelope for Open {
        fn reveal(&self, _: Access) -> bool {
            true
        }
    }
    let mut e = Message::enveloped(Message::new_mutable(Counted(drops.clone(), 5)), Open);
    assert_eq!(e.handler_take_owned::<Counted>().map(|c| c.1), Some(5));
    drop(e);
    assert_eq!(drops.load(Ordering::SeqCst), 5);
}

#[test]
fn mutable_payload_is_taken_once() {
    let m = Message::new_mutable(String::from("x"));
    let other = m.clone();
    assert_eq!(m.take_mutable::<String>().as_deref(), Some("x"));
    assert_eq!(other.take_mutable::<String>(), None);
    assert_eq!(m.downcast_ref::<String>(), None);
}

#[test]
fn a_mutable_message_reuses_a_freed_block_and_drops_an_untaken_value_with_it() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Counted(Arc<AtomicUsize>, u32);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    // Taken, then freed: the next mutable message of its size takes the block.
    let m = Message::new_mutable(Counted(drops.clone(), 1));
    let first = payload_address(&m);
    assert_eq!(m.take_mutable::<Counted>().map(|c| c.1), Some(1));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    m.recycle();
    assert_eq!(drops.load(Ordering::SeqCst), 1, "nothing left to drop");
    let n = Message::new_mutable(Counted(drops.clone(), 2));
    assert_eq!(payload_address(&n), first, "the freed block");
    // Not taken (no handler took it): its value goes with the message, at once.
    n.recycle();
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    // Taken but still referenced elsewhere: the block stays with the other copy.
    let o = Message::new_mutable(Counted(drops.clone(), 3));
    let copy = o.clone();
    assert_eq!(o.take_mutable::<Counted>().map(|c| c.1), Some(3));
    o.recycle();
    let p = Message::new_mutable(Counted(drops.clone(), 4));
    assert_ne!(payload_address(&p), payload_address(&copy));
    assert_eq!(copy.take_mutable::<Counted>().map(|c| c.1), None);
    assert_eq!(p.take_mutable::<Counted>().map(|c| c.1), Some(4));
    // A burst: a thousand in flight, then all freed, then a thousand again, each value
    // dropped once.
    let burst: Vec<_> = (0..1000)
        .map(|i| Message::new_mutable(Counted(drops.clone(), i)))
        .collect();
    let taken: u32 = burst
        .iter()
        .step_by(2)
        .filter_map(|m| m.take_mutable::<Counted>().map(|c| c.1))
        .count() as u32;
    assert_eq!(taken, 500);
    drop(burst);
    assert_eq!(drops.load(Ordering::SeqCst), 4 + 1000);
    let again: Vec<_> = (0..1000)
        .map(|i| Message::new_mutable(Counted(drops.clone(), i)))
        .collect();
    assert!(again
        .iter()
        .enumerate()
        .all(|(i, m)| m.take_mutable::<Counted>().map(|c| c.1) == Some(i as u32)));
    drop((copy, p, again));
    assert_eq!(drops.load(Ordering::SeqCst), 4 + 2000);
}
