use super::*;

#[test]
fn distinct_types_get_distinct_nonzero_keys() {
    let keys = [
        type_key(&TypeId::of::<u8>()),
        type_key(&TypeId::of::<u16>()),
        type_key(&TypeId::of::<String>()),
        type_key(&TypeId::of::<()>()),
    ];
    for (i, a) in keys.iter().enumerate() {
        assert_ne!(*a, 0);
        for b in &keys[i + 1..] {
            assert_ne!(a, b);
        }
    }
    assert_eq!(keys[0], type_key(&TypeId::of::<u8>()));
}

#[test]
fn lookup_answers_from_an_exact_copy_and_defers_otherwise() {
    let t = FastTypes::new();
    assert_eq!(t.lookup(5), Some(false));
    t.publish(Some(&[5, 6]));
    assert_eq!(t.lookup(5), Some(true));
    assert_eq!(t.lookup(7), Some(false));
    t.publish(None);
    assert_eq!(t.lookup(5), None);
    t.publish(Some(&[1, 2, 3, 4, 5, 6, 7, 8, 9]));
    assert_eq!(t.lookup(9), None, "more than SLOTS types: ask the lock");
    t.publish(Some(&[6]));
    assert_eq!(t.lookup(5), Some(false));
    assert_eq!(t.lookup(6), Some(true));
}
