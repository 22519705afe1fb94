//! Typed Rust side of `store.cpp`: libtorch's c10d `TCPStore`, the
//! key-value store the ranks' per-step barrier (`stallscope_core::ranks`) runs through
//! ([`KvStore`]; `StoreError` carries libtorch's message, without its
//! backtrace).

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::time::Duration;

unsafe extern "C" {
    fn ss_store_last_error() -> *const c_char;
    fn ss_store_open(
        host: *const c_char,
        port: u16,
        is_server: c_int,
        timeout_ms: i64,
    ) -> *mut c_void;
    fn ss_store_free(store: *mut c_void);
    #[cfg(test)]
    fn ss_store_port(store: *mut c_void) -> c_int;
    fn ss_store_set(store: *mut c_void, key: *const c_char, value: *const c_char) -> c_int;
    fn ss_store_add(store: *mut c_void, key: *const c_char, delta: i64, out: *mut i64) -> c_int;
    fn ss_store_check(store: *mut c_void, key: *const c_char) -> c_int;
    fn ss_store_delete(store: *mut c_void, key: *const c_char) -> c_int;
    fn ss_store_get(store: *mut c_void, key: *const c_char, buf: *mut c_char, cap: c_int) -> c_int;
    fn ss_store_wait(
        store: *mut c_void,
        keys: *const *const c_char,
        n: c_int,
        timeout_ms: i64,
    ) -> c_int;
}

pub use stallscope_core::ranks::{KvStore, StoreError, Waited};

fn error(call: &'static str) -> StoreError {
    // SAFETY: a pointer to the shim's thread-local NUL-terminated string.
    let message = unsafe { CStr::from_ptr(ss_store_last_error()) }
        .to_string_lossy()
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    StoreError { call, message }
}

fn c(s: &str) -> CString {
    CString::new(s.replace('\0', "")).expect("NUL bytes removed")
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// One connection to a `TCPStore` (the server too, on rank 0).
pub struct TcpStore {
    ptr: *mut c_void,
}

// SAFETY: TCPStore serialises its operations under its own lock
// (`activeOpLock_`); the handle is only freed on drop.
unsafe impl Send for TcpStore {}
unsafe impl Sync for TcpStore {}

impl TcpStore {
    /// Host the store on `port` (0: any free port), or connect to it,
    /// retrying until `timeout`; every later operation is bounded by it too.
    pub fn open(
        host: &str,
        port: u16,
        server: bool,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let h = c(host);
        // SAFETY: a valid C string; the shim returns NULL on failure.
        let ptr = unsafe { ss_store_open(h.as_ptr(), port, c_int::from(server), millis(timeout)) };
        if ptr.is_null() {
            Err(error("open"))
        } else {
            Ok(TcpStore { ptr })
        }
    }

    /// The port the store listens on (the tests' clients connect to it).
    #[cfg(test)]
    pub fn port(&self) -> u16 {
        // SAFETY: a live store.
        unsafe { ss_store_port(self.ptr) as u16 }
    }

    pub fn set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        let (k, v) = (c(key), c(value));
        // SAFETY: a live store and valid C strings.
        match unsafe { ss_store_set(self.ptr, k.as_ptr(), v.as_ptr()) } {
            0 => Ok(()),
            _ => Err(error("set")),
        }
    }

    /// Add `delta` to the counter `key` (created at 0), returning the sum.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        let k = c(key);
        let mut out = 0i64;
        // SAFETY: a live store, a valid C string and out pointer.
        match unsafe { ss_store_add(self.ptr, k.as_ptr(), delta, &mut out) } {
            0 => Ok(out),
            _ => Err(error("add")),
        }
    }

    pub fn exists(&self, key: &str) -> Result<bool, StoreError> {
        let k = c(key);
        // SAFETY: a live store and a valid C string.
        match unsafe { ss_store_check(self.ptr, k.as_ptr()) } {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(error("check")),
        }
    }

    /// The value of `key`, which exists (a missing key waits for the
    /// store's timeout), whole: a value longer than the first buffer is
    /// asked for again with room for it.
    pub fn get(&self, key: &str) -> Result<String, StoreError> {
        let k = c(key);
        let mut buf = vec![0u8; 256];
        loop {
            // SAFETY: a live store, a valid C string, and a buffer of `cap` bytes.
            let n = unsafe {
                ss_store_get(
                    self.ptr,
                    k.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len() as c_int,
                )
            };
            let n = usize::try_from(n).map_err(|_| error("get"))?;
            if n < buf.len() {
                return Ok(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
            buf.resize(n + 1, 0);
        }
    }

    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        let k = c(key);
        // SAFETY: a live store and a valid C string.
        match unsafe { ss_store_delete(self.ptr, k.as_ptr()) } {
            0 => Ok(()),
            _ => Err(error("delete")),
        }
    }

    /// Wait until every key exists, at most `timeout`.
    pub fn wait(&self, keys: &[String], timeout: Duration) -> Result<Waited, StoreError> {
        let owned: Vec<CString> = keys.iter().map(|k| c(k)).collect();
        let ptrs: Vec<*const c_char> = owned.iter().map(|k| k.as_ptr()).collect();
        // SAFETY: a live store; `ptrs` points into `owned`, alive for the call.
        let rc = unsafe {
            ss_store_wait(
                self.ptr,
                ptrs.as_ptr(),
                ptrs.len() as c_int,
                millis(timeout),
            )
        };
        match rc {
            0 => Ok(Waited::Ready),
            1 => Ok(Waited::TimedOut),
            _ => Err(error("wait")),
        }
    }
}

impl KvStore for TcpStore {
    fn set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        TcpStore::set(self, key, value)
    }
    fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        TcpStore::add(self, key, delta)
    }
    fn exists(&self, key: &str) -> Result<bool, StoreError> {
        TcpStore::exists(self, key)
    }
    fn get(&self, key: &str) -> Result<String, StoreError> {
        TcpStore::get(self, key)
    }
    fn delete(&self, key: &str) -> Result<(), StoreError> {
        TcpStore::delete(self, key)
    }
    fn wait(&self, keys: &[String], timeout: Duration) -> Result<Waited, StoreError> {
        TcpStore::wait(self, keys, timeout)
    }
}

/// The ranks' store opener for libtorch's c10d `TCPStore`.
pub fn open_tcp_store(
    host: &str,
    port: u16,
    server: bool,
    timeout: Duration,
) -> Result<Box<dyn KvStore>, StoreError> {
    Ok(Box::new(TcpStore::open(host, port, server, timeout)?))
}

impl Drop for TcpStore {
    fn drop(&mut self) {
        // SAFETY: created by ss_store_open, freed once.
        unsafe { ss_store_free(self.ptr) }
    }
}

#[cfg(test)]
mod tests {
    use stallscope_core::ranks::{Barrier, BarrierError, Place};

    use super::*;

    /// The ranks' barrier over this store (as a ranked run uses it): three
    /// ranks as threads meet 20 times; then rank 2 stops coming and the
    /// others time out naming it.
    #[test]
    fn the_ranks_barrier_meets_over_it_and_names_a_missing_rank() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let t = Duration::from_millis(1500);
        let all: Vec<Barrier> = (0..3)
            .map(|r| {
                let at = Place {
                    addr: "127.0.0.1",
                    port,
                    server: r == 0,
                };
                Barrier::connect(&open_tcp_store, at, r, 3, t, "b/").unwrap()
            })
            .collect();
        std::thread::scope(|s| {
            for b in &all {
                s.spawn(move || {
                    for step in 0..20 {
                        b.arrive(&format!("step {step}")).unwrap();
                    }
                });
            }
        });
        let ends: Vec<_> = std::thread::scope(|s| {
            let h: Vec<_> = all[..2]
                .iter()
                .map(|b| s.spawn(move || b.arrive("step 0 of epoch 1")))
                .collect();
            h.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for end in ends {
            let Err(BarrierError::Comm(f)) = end else {
                panic!("expected a comm timeout, got {end:?}")
            };
            let stallscope_bundle::Failure::CommTimeout { missing_ranks, .. } = *f else {
                panic!("{f:?}")
            };
            assert_eq!(missing_ranks, vec![2]);
        }
    }

    #[test]
    fn a_taken_port_is_a_message_saying_what_to_check() {
        let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let t = Duration::from_secs(2);
        let at = Place {
            addr: "127.0.0.1",
            port,
            server: true,
        };
        let e = Barrier::connect(&open_tcp_store, at, 0, 2, t, "t/")
            .err()
            .unwrap();
        assert!(
            e.starts_with(&format!(
                "rank 0: cannot host the ranks' store on port {port} ("
            )),
            "{e}"
        );
        assert!(
            e.ends_with("or pick another with MASTER_PORT or --master-port"),
            "{e}"
        );
    }

    #[test]
    fn a_server_and_a_client_share_keys_and_a_missing_key_times_out() {
        let t = Duration::from_secs(10);
        let server = TcpStore::open("127.0.0.1", 0, true, t).unwrap();
        let client = TcpStore::open("127.0.0.1", server.port(), false, t).unwrap();
        client.set("k", "v").unwrap();
        assert!(server.exists("k").unwrap());
        assert_eq!(server.add("n", 2).unwrap(), 2);
        assert_eq!(client.add("n", 3).unwrap(), 5);
        assert_eq!(server.wait(&["k".into()], t).unwrap(), Waited::Ready);
        let short = Duration::from_millis(200);
        assert_eq!(
            client.wait(&["absent".into()], short).unwrap(),
            Waited::TimedOut
        );
        assert_eq!(server.get("k").unwrap(), "v");
        // Values longer than the first buffer come back whole.
        for len in [255, 256, 257, 1000] {
            let long: String = "é".repeat(len / 2) + &"x".repeat(len % 2);
            client.set("long", &long).unwrap();
            assert_eq!(server.get("long").unwrap(), long, "{len} characters");
        }
        client.delete("k").unwrap();
        assert!(!server.exists("k").unwrap());
    }

    /// The barrier waits in short slices: a wait that timed out must leave
    /// the connection in step (c10d cancels it), even when the key comes
    /// right at the slice's end. Over generated delays around the slice,
    /// every key is seen by a later slice and every later reply is right.
    #[test]
    fn waits_that_time_out_leave_the_connection_in_step() {
        let t = Duration::from_secs(10);
        let server = TcpStore::open("127.0.0.1", 0, true, t).unwrap();
        let port = server.port();
        let waiter = TcpStore::open("127.0.0.1", port, false, t).unwrap();
        let setter = TcpStore::open("127.0.0.1", port, false, t).unwrap();
        let mut rng = stallscope_loader::Rng::new(3);
        let slice = Duration::from_millis(20);
        for case in 0..40 {
            let key = format!("late/{case}");
            let delay = Duration::from_millis(10 + rng.below(30));
            std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(delay);
                    setter.set(&key, &format!("v{case}")).unwrap();
                });
                let mut slices = 0;
                while waiter.wait(std::slice::from_ref(&key), slice).unwrap() == Waited::TimedOut {
                    slices += 1;
                    // Another request between slices gets its own reply.
                    assert!(!waiter.exists(&format!("never/{case}")).unwrap());
                    assert!(slices < 500, "case {case}: the key never came");
                }
            });
            assert_eq!(waiter.get(&key).unwrap(), format!("v{case}"), "case {case}");
            assert_eq!(waiter.add("count", 1).unwrap(), case as i64 + 1);
        }
    }

    #[test]
    fn an_unreachable_master_is_an_error_naming_it() {
        // A port that was free a moment ago: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = TcpStore::open("127.0.0.1", port, false, Duration::from_millis(500))
            .err()
            .expect("no server");
        assert!(e.message.contains(&port.to_string()), "{e}");
    }
}
