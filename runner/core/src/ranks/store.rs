//! The key-value store the ranks meet through, as a small trait: libtorch's
//! c10d `TCPStore` implements it in the libtorch back end (`shim::store`), and
//! [`MemStore`] here, in memory and counting every key it touches, lets the
//! barrier's logic be tested without a device library (the ranks as
//! threads over one store).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A store operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("c10d TCPStore ({call}): {message}")]
pub struct StoreError {
    pub call: &'static str,
    pub message: String,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    Ready,
    TimedOut,
}

/// What the barrier needs of a store (c10d's `Store` API, in part).
pub trait KvStore: Send + Sync {
    fn set(&self, key: &str, value: &str) -> Result<(), StoreError>;
    /// Add `delta` to the integer at `key` (0 when absent); the new value.
    fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError>;
    fn exists(&self, key: &str) -> Result<bool, StoreError>;
    fn get(&self, key: &str) -> Result<String, StoreError>;
    fn delete(&self, key: &str) -> Result<(), StoreError>;
    /// Wait until every key exists, at most `timeout`.
    fn wait(&self, keys: &[String], timeout: Duration) -> Result<Waited, StoreError>;
}

/// Host the store (`server`) or connect to it at `host:port`, retrying until
/// the timeout: how a ranked run gets its store.
pub type StoreOpener =
    dyn Fn(&str, u16, bool, Duration) -> Result<Box<dyn KvStore>, StoreError> + Sync;

/// A store in memory, shared by threads, that counts the keys its
/// operations touch (a wait on `n` keys touches `n`).
#[derive(Default)]
pub struct MemStore {
    map: Mutex<HashMap<String, String>>,
    changed: Condvar,
    touched: AtomicU64,
}

impl MemStore {
    /// Keys touched so far.
    pub fn touched(&self) -> u64 {
        self.touched.load(Ordering::Relaxed)
    }

    fn touch(&self, n: usize) {
        self.touched.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl KvStore for MemStore {
    fn set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.touch(1);
        self.map().insert(key.into(), value.into());
        self.changed.notify_all();
        Ok(())
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        self.touch(1);
        let mut map = self.map();
        let now = map
            .get(key)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
            + delta;
        map.insert(key.into(), now.to_string());
        drop(map);
        self.changed.notify_all();
        Ok(now)
    }

    fn exists(&self, key: &str) -> Result<bool, StoreError> {
        self.touch(1);
        Ok(self.map().contains_key(key))
    }

    fn get(&self, key: &str) -> Result<String, StoreError> {
        self.touch(1);
        self.map().get(key).cloned().ok_or_else(|| StoreError {
            call: "get",
            message: format!("key {key:?} not found"),
        })
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.touch(1);
        self.map().remove(key);
        Ok(())
    }

    fn wait(&self, keys: &[String], timeout: Duration) -> Result<Waited, StoreError> {
        self.touch(keys.len());
        let deadline = Instant::now() + timeout;
        let mut map = self.map();
        loop {
            if keys.iter().all(|k| map.contains_key(k)) {
                return Ok(Waited::Ready);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Waited::TimedOut);
            }
            map = self
                .changed
                .wait_timeout(map, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A shared `MemStore` as every rank's connection.
impl KvStore for std::sync::Arc<MemStore> {
    fn set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        (**self).set(key, value)
    }
    fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        (**self).add(key, delta)
    }
    fn exists(&self, key: &str) -> Result<bool, StoreError> {
        (**self).exists(key)
    }
    fn get(&self, key: &str) -> Result<String, StoreError> {
        (**self).get(key)
    }
    fn delete(&self, key: &str) -> Result<(), StoreError> {
        (**self).delete(key)
    }
    fn wait(&self, keys: &[String], timeout: Duration) -> Result<Waited, StoreError> {
        (**self).wait(keys, timeout)
    }
}
