//! Batch buffers recycled between the consumer and the workers: a batch is
//! written into memory an earlier batch used, so it pays no fresh pages, no
//! zero fill and no allocation (the consumer hands the buffer back when its
//! tensor is freed).

use std::sync::{Arc, Mutex};

/// Free input buffers, at most `keep` of them.
#[derive(Debug)]
pub struct BufferPool {
    free: Mutex<Vec<Vec<f32>>>,
    keep: usize,
}

impl BufferPool {
    pub fn new(keep: usize) -> Arc<BufferPool> {
        Arc::new(BufferPool {
            free: Mutex::new(Vec::new()),
            keep: keep.max(1),
        })
    }

    /// A buffer of exactly `len` elements. A recycled one keeps its old
    /// values (every element a batch keeps is written before it is read);
    /// only growth is zero-filled.
    pub fn take(&self, len: usize) -> Vec<f32> {
        let found = {
            let mut free = self.free.lock().expect("buffer pool lock");
            match free.iter().position(|v| v.capacity() >= len) {
                Some(i) => Some(free.swap_remove(i)),
                None => free.pop(),
            }
        };
        let mut v = found.unwrap_or_default();
        if v.len() >= len {
            v.truncate(len);
        } else {
            v.resize(len, 0.0);
        }
        v
    }

    /// Hand a buffer back (dropped when the pool already holds `keep`).
    pub fn give(&self, v: Vec<f32>) {
        if v.capacity() == 0 {
            return;
        }
        let mut free = self.free.lock().expect("buffer pool lock");
        if free.len() < self.keep {
            free.push(v);
        }
    }

    /// Buffers waiting to be reused.
    pub fn idle(&self) -> usize {
        self.free.lock().expect("buffer pool lock").len()
    }
}

/// A batch's inputs on their way to the consumer's tensor: back to the
/// pool when dropped.
#[derive(Debug)]
pub struct Pooled {
    pub values: Vec<f32>,
    pool: Arc<BufferPool>,
}

impl Pooled {
    pub fn new(values: Vec<f32>, pool: Arc<BufferPool>) -> Pooled {
        Pooled { values, pool }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.values));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_without_new_allocations_and_the_pool_is_bounded() {
        let pool = BufferPool::new(2);
        let a = pool.take(1000);
        assert_eq!(a.len(), 1000);
        let ptr = a.as_ptr();
        drop(Pooled::new(a, pool.clone()));
        assert_eq!(pool.idle(), 1);
        let b = pool.take(600);
        assert_eq!(
            (b.len(), b.as_ptr()),
            (600, ptr),
            "the same memory, shortened"
        );
        let c = pool.take(1200);
        assert_eq!(c.len(), 1200);
        for v in [b, c, vec![1.0; 10]] {
            pool.give(v);
        }
        assert_eq!(pool.idle(), 2, "at most `keep` are kept");
    }
}
