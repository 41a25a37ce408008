use loom::sync::Arc;

use super::FastTypes;

/// The defect this protocol fixes: type 1 stays subscribed while type 2 is removed
/// (shifting type 1 to the first slot) and added again; a reader must never be told
/// that type 1 is not subscribed.
#[test]
fn a_type_subscribed_throughout_is_never_refused() {
    loom::model(|| {
        let t = Arc::new(FastTypes::new());
        t.publish(Some(&[2, 1]));
        let writer = {
            let t = t.clone();
            loom::thread::spawn(move || {
                t.publish(Some(&[1]));
                t.publish(Some(&[1, 2]));
            })
        };
        assert_ne!(t.lookup(1), Some(false));
        writer.join().unwrap();
        assert_eq!(t.lookup(1), Some(true));
        assert_eq!(t.lookup(2), Some(true));
    });
}

/// A reader sees either the table before or the table after, never a mix.
#[test]
fn a_reader_sees_a_whole_table() {
    loom::model(|| {
        let t = Arc::new(FastTypes::new());
        t.publish(Some(&[3]));
        let writer = {
            let t = t.clone();
            loom::thread::spawn(move || t.publish(Some(&[4])))
        };
        let (a, b) = (t.lookup(3), t.lookup(4));
        // Type 3 absent means the new table was published; type 4 is then present.
        assert!(!(a == Some(false) && b == Some(false)), "{a:?} {b:?}");
        writer.join().unwrap();
        assert_eq!(t.lookup(3), Some(false));
        assert_eq!(t.lookup(4), Some(true));
    });
}
