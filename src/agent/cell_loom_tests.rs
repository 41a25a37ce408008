use loom::sync::Arc;

use super::SetOnce;

/// Two setters race: exactly one wins, and a reader sees nothing or the winner's
/// whole value (loom's cell flags a read that races the write).
#[test]
fn one_of_two_racing_sets_wins_and_readers_see_its_value() {
    loom::model(|| {
        let cell = Arc::new(SetOnce::new());
        let setters: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|v| {
                let cell = cell.clone();
                loom::thread::spawn(move || cell.set(v).is_ok())
            })
            .collect();
        let seen = cell.get().copied();
        let won: Vec<bool> = setters.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
        let value = *cell.get().expect("set");
        assert_eq!(value, if won[0] { 1 } else { 2 });
        assert!(seen.is_none() || seen == Some(value), "{seen:?}");
    });
}
