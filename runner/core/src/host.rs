//! Host facts every back end reads the same way: this process's peak resident
//! memory (`VmHWM`, through the one `/proc` reader in `crate::cost::proc`)
//! and its reset between epochs, so `host_peak_rss_bytes` means the same on
//! every back end: the epoch's own peak where the kernel allows the reset.

/// This process's peak resident set size (`VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    crate::cost::proc::peak_rss_bytes(std::process::id())
}

/// Reset `VmHWM` to the current RSS (`/proc/self/clear_refs` "5"). Returns
/// whether the kernel allowed it; when not, the recorded peak is the
/// process's peak so far (the bundle's notes say so).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The note a bundle carries when the reset is refused.
pub fn peak_rss_note() -> Option<String> {
    (!reset_peak_rss()).then(|| {
        "Host peak RSS could not be reset between epochs (/proc/self/clear_refs refused): \
         each figure is the process's peak so far."
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_peak_is_read_and_follows_a_reset() {
        let before = super::peak_rss_bytes().expect("VmHWM in /proc/self/status");
        assert!(before > 1 << 20, "{before}");
        // 64 MiB touched, then freed: the peak holds it until a reset.
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let high = super::peak_rss_bytes().unwrap();
        drop(big);
        assert!(high >= 64 << 20, "{high}");
        assert!(super::reset_peak_rss(), "/proc/self/clear_refs refused");
        let after = super::peak_rss_bytes().unwrap();
        assert!(
            after + (32 << 20) < high,
            "{after} after a reset, {high} before"
        );
    }
}
