//! The one poisoning policy of Berth's services: a lock whose holder panicked is taken as it is. A panic in one
//! request (or task) must not take down every later request that needs the same lock, and the data under these
//! locks stays valid between statements (maps and lists changed by one call at a time, never left half-written
//! across a call that can panic), so there is nothing to repair.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering it if an earlier holder panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_with_what_it_holds() {
        let shared = std::sync::Arc::new(Mutex::new(vec![1]));
        let holder = shared.clone();
        let panicked = std::thread::spawn(move || {
            let mut held = holder.lock().unwrap();
            held.push(2);
            panic!("a holder panics");
        })
        .join();
        assert!(panicked.is_err());
        assert!(shared.is_poisoned());
        lock(&shared).push(3);
        assert_eq!(*lock(&shared), [1, 2, 3]);
    }
}
