//! Process-wide caches of tables: a server resizes and normalises the same few sizes and
//! tables again and again, so what is built from them is kept, a few entries a kind.
//!
//! Servers fork worker processes after importing mmfast, while other threads may be inside
//! a call. A lock held by such a thread at the fork stays held in the child, whose copy of
//! that thread does not exist: a cache never waits for its lock for long. After a few
//! tries it builds the value without the cache, so a child forked at that moment does
//! without the cache instead of hanging. The entries themselves are plain values, as good
//! in the child as in the parent.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// Entries a cache keeps.
const ENTRIES: usize = 16;

/// Times [`cached`] tries a lock held by another thread before doing without the cache (a
/// holder keeps it for a search of at most [`ENTRIES`] keys).
const TRIES: usize = 64;

/// Recently built values by what they were built from, oldest first.
pub(crate) type Cache<K, V> = Mutex<Vec<(K, Arc<V>)>>;

/// The lock of `cache`, or `None` when another thread still holds it after [`TRIES`]
/// tries (or held it when this process was forked from its parent).
fn lock<T>(cache: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    for _ in 0..TRIES {
        match cache.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => return Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => std::thread::yield_now(),
        }
    }
    None
}

/// The value for `key` from `cache`, made by `make` (outside the lock) if absent; the
/// oldest entry goes when the cache is full.
///
/// # Errors
/// What `make` returns.
pub(crate) fn cached<K: PartialEq, V, E>(
    cache: &Cache<K, V>,
    key: K,
    make: impl FnOnce() -> Result<V, E>,
) -> Result<Arc<V>, E> {
    if let Some(entries) = lock(cache) {
        if let Some((_, value)) = entries.iter().find(|(k, _)| *k == key) {
            return Ok(Arc::clone(value));
        }
    }
    let value = Arc::new(make()?);
    if let Some(mut entries) = lock(cache) {
        if entries.len() >= ENTRIES {
            entries.remove(0);
        }
        entries.push((key, Arc::clone(&value)));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Mutex;

    use super::{cached, Cache, ENTRIES};

    #[test]
    fn values_are_made_once_and_the_cache_stays_bounded() {
        let cache: Cache<usize, usize> = Mutex::new(Vec::new());
        let made = std::cell::Cell::new(0);
        let get = |key: usize| {
            *cached(&cache, key, || {
                made.set(made.get() + 1);
                Ok::<_, Infallible>(10 * key)
            })
            .unwrap()
        };
        assert_eq!((get(1), get(2), get(1)), (10, 20, 10));
        assert_eq!(made.get(), 2);
        for key in 0..3 * ENTRIES {
            assert_eq!(get(key), 10 * key);
        }
        assert_eq!(cache.lock().unwrap().len(), ENTRIES);
        // The oldest went first: the latest keys are still kept.
        let before = made.get();
        get(3 * ENTRIES - 1);
        assert_eq!(made.get(), before);
    }

    #[test]
    fn a_lock_left_held_costs_the_cache_not_a_hang() {
        // As in a child forked while another thread held the lock: the holder never
        // releases it.
        let cache: Cache<usize, usize> = Mutex::new(Vec::new());
        let held = cache.lock().unwrap();
        assert_eq!(*cached(&cache, 7, || Ok::<_, Infallible>(70)).unwrap(), 70);
        assert!(held.is_empty(), "nothing was kept");
        drop(held);
        assert_eq!(*cached(&cache, 7, || Ok::<_, Infallible>(70)).unwrap(), 70);
        assert_eq!(cache.lock().unwrap().len(), 1);
    }
}
