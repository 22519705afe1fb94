//! The process groups of the Python processes alive now: a second Ctrl-C
//! ends them all before the runner quits ([`kill_all_groups`]), since a
//! group of its own, which the terminal's Ctrl-C does not reach, would
//! otherwise outlive the runner.

use std::sync::Mutex;

static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Holds a process group in the registry while it lives.
pub(crate) struct OwnedGroup(i32);

/// Register the process group `pgid` until the guard drops.
pub(crate) fn own_group(pgid: i32) -> OwnedGroup {
    GROUPS.lock().unwrap_or_else(|e| e.into_inner()).push(pgid);
    OwnedGroup(pgid)
}

impl Drop for OwnedGroup {
    fn drop(&mut self) {
        GROUPS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|g| *g != self.0);
    }
}

/// SIGKILL every registered process group (the runner is about to quit).
pub fn kill_all_groups() {
    for g in GROUPS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        // SAFETY: a signal to a group this runner started; it may be gone.
        unsafe { libc::kill(-g, libc::SIGKILL) };
    }
}

/// Send `signal` to the process group `pgid`.
pub(crate) fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) on a group this runner created for its child; it may be gone.
    unsafe { libc::kill(-pgid, signal) };
}
