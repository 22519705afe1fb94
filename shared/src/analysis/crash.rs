//! Why a configuration's process crashed, read from the texts PyTorch
//! prints and the signal that ended it (Linux numbers), and the one
//! readable line a crashed configuration is recorded with.
//!
//! The texts are PyTorch's own: the DataLoader's worker-status check
//! ("DataLoader worker (pid N) is killed by signal: Bus error. It is
//! possible that dataloader's workers are out of shared memory"), its bus
//! error handler ("Unexpected bus error encountered in worker. This might
//! be caused by insufficient shared memory (shm)"), the allocator of shared
//! storages ("unable to allocate shared memory(shm) for file
//! </torch_...>", "unable to write to file </torch_...>: No space left on
//! device (28)"), "killed by signal: Killed" (SIGKILL, the OOM killer's
//! signal) and "exited unexpectedly".

use crate::format::{CrashCause, Failure};

/// SIGBUS and SIGKILL on Linux.
const SIGBUS: i32 = 7;
const SIGKILL: i32 = 9;

/// The longest telling line kept in a crash's one-line message.
const LINE_CHARS: usize = 240;

/// The cause of a crash from its text and the signal that ended the
/// process (if one did).
pub fn crash_cause(message: &str, signal: Option<i32>) -> CrashCause {
    let m = message.to_ascii_lowercase();
    let shm_file = m.contains("</torch_") || m.contains("/dev/shm");
    if m.contains("bus error")
        || m.contains("shared memory")
        || m.contains("(shm)")
        || (shm_file && m.contains("no space left on device"))
        || signal == Some(SIGBUS)
    {
        return CrashCause::SharedMemory;
    }
    if m.contains("killed by signal: killed")
        || m.contains("oom-kill")
        || m.contains("out of memory: killed process")
        || m.contains("cannot allocate memory")
        || m.contains("memoryerror")
        || signal == Some(SIGKILL)
    {
        return CrashCause::OomKilled;
    }
    if m.contains("no space left on device") {
        return CrashCause::NoSpace;
    }
    if m.contains("dataloader worker")
        && (m.contains("killed by signal") || m.contains("exited unexpectedly"))
    {
        return CrashCause::WorkerSignal;
    }
    CrashCause::Other
}

/// The signal behind an exit status the shell way (128 + N), if any.
pub fn signal_of_exit(code: i32) -> Option<i32> {
    (129..=192).contains(&code).then_some(code - 128)
}

/// What to try for a cause, when there is a known answer.
fn advice(cause: &CrashCause) -> Option<&'static str> {
    match cause {
        CrashCause::SharedMemory => Some(
            "fewer workers, a smaller prefetch_factor or smaller batches, or a larger /dev/shm \
             (docker run --shm-size)",
        ),
        CrashCause::OomKilled => Some(
            "fewer workers, or less memory per worker (copy-on-read of Python objects grows \
             every forked worker)",
        ),
        CrashCause::NoSpace => Some("free disk space where the script writes"),
        _ => None,
    }
}

/// The line of `message` that names the cause: the first that matches a
/// pattern of it, else the last non-empty line.
fn telling_line(message: &str, cause: &CrashCause) -> String {
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let matches = |l: &&&str| crash_cause(l, None) == *cause && *cause != CrashCause::Other;
    let line = lines
        .iter()
        .find(matches)
        .or(lines.last())
        .map_or(String::new(), |l| clause(l).to_string());
    if line.chars().count() > LINE_CHARS {
        line.chars().take(LINE_CHARS - 1).chain(['…']).collect()
    } else {
        line
    }
}

/// Within one long line (a message that strings an exit, an exception and
/// a traceback's frame together), the exception that names the cause:
/// from the error's name (`RuntimeError: ...`) before the first telling
/// words to the end of that clause.
fn clause(line: &str) -> &str {
    const TELLING: [&str; 6] = [
        "shared memory",
        "bus error",
        "killed by signal",
        "no space left",
        "cannot allocate memory",
        "exited unexpectedly",
    ];
    let lower = line.to_ascii_lowercase();
    let Some(k) = TELLING.iter().filter_map(|t| lower.find(t)).min() else {
        return line;
    };
    let start = line[..k]
        .rfind("Error: ")
        .and_then(|e| line[..e].rfind([' ', '(']).map(|s| s + 1).or(Some(0)))
        .unwrap_or(0);
    let end = line[k..].find(") (").map_or(line.len(), |e| k + e);
    line[start..end].trim()
}

/// "; ended by signal 9 (SIGKILL)" after `line`.
fn with_signal(mut line: String, signal: Option<i32>) -> String {
    if let Some(s) = signal {
        let name = match s {
            SIGBUS => " (SIGBUS)",
            SIGKILL => " (SIGKILL)",
            _ => "",
        };
        let sep = if line.is_empty() { "" } else { "; " };
        line.push_str(&format!("{sep}ended by signal {s}{name}"));
    }
    line
}

/// What a cause is called in its one line, no surer than its evidence: a
/// SIGKILL is the OOM killer's signal, but anyone may send it, so without
/// the kernel's own words it is "most likely" memory; a refused allocation
/// (`MemoryError`) is out of memory without any kill.
fn headline<'a>(cause: &'a CrashCause, message: &str) -> &'a str {
    if *cause != CrashCause::OomKilled {
        return cause.label();
    }
    let m = message.to_ascii_lowercase();
    if m.contains("oom-kill") || m.contains("out of memory: killed process") {
        "killed by the OOM killer"
    } else if m.contains("memoryerror") || m.contains("cannot allocate memory") {
        "out of memory (an allocation was refused)"
    } else {
        "killed by SIGKILL, most likely for memory (the OOM killer's signal; dmesg tells)"
    }
}

/// A crashed configuration's failure: its cause, one readable line (the
/// cause, the telling line of the text, what to try) and the whole text
/// when it has more than that line. A signal is read from a shell-style
/// exit status (137 = SIGKILL) when none is given.
pub fn crash_failure(message: &str, signal: Option<i32>, exit_code: Option<i32>) -> Failure {
    let signal = signal.or(exit_code.and_then(signal_of_exit));
    let cause = crash_cause(message, signal);
    let line = telling_line(message, &cause);
    let detail = (message.trim() != line).then(|| message.to_string());
    let mut one = format!(
        "{}: {}",
        headline(&cause, message),
        with_signal(line, signal)
    );
    if let Some(a) = advice(&cause) {
        one.push_str(&format!(" (try {a})"));
    }
    Failure::Crashed {
        cause,
        signal,
        exit_code,
        message: one,
        detail: detail.filter(|d| !d.trim().is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts as PyTorch 2.x prints them.
    const BUS: &str = "ERROR: Unexpected bus error encountered in worker. This might be caused \
                       by insufficient shared memory (shm).\nTraceback (most recent call last):\n  \
                       File \"train.py\", line 40, in <module>\n    for x, y in loader:\nRuntimeError: \
                       DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible \
                       that dataloader's workers are out of shared memory. Please try to raise \
                       your shared memory limit.";
    const ALLOC: &str = "RuntimeError: unable to allocate shared memory(shm) for file \
                         </torch_5115_2963338752_0>: Resource temporarily unavailable (11)";
    const WRITE: &str = "RuntimeError: unable to write to file </torch_18692_1954506624_1>: No \
                         space left on device (28)";
    const KILLED: &str = "RuntimeError: DataLoader worker (pid 917) is killed by signal: Killed. ";
    const SEGV: &str = "RuntimeError: DataLoader worker (pid 3310) is killed by signal: \
                        Segmentation fault. ";
    const EXITED: &str = "RuntimeError: DataLoader worker (pid(s) 2107, 2108) exited unexpectedly";
    const DISK: &str = "OSError: [Errno 28] No space left on device: '/tmp/ckpt/step_100.pt'";

    #[test]
    fn a_long_line_is_cut_to_the_exception_that_names_the_cause() {
        let job = "the script ended (exception) after 0 of 4 steps, in its window: RuntimeError: \
                   unable to allocate shared memory(shm) for file </torch_5264_2138023531_0>: \
                   Resource temporarily unavailable (11) (File \"/root/x.py\", line 3) \
                   (python train.py ended with exit status 1)";
        let Failure::Crashed { message, .. } = crash_failure(job, None, Some(1)) else {
            panic!("a crash");
        };
        assert!(
            message.starts_with(
                "shared memory exhausted: RuntimeError: unable to allocate shared memory(shm)"
            ),
            "{message}"
        );
        assert!(!message.contains("/root/x.py"), "{message}");
    }

    #[test]
    fn pytorch_texts_get_their_causes() {
        let cases = [
            (BUS, None, CrashCause::SharedMemory),
            (ALLOC, None, CrashCause::SharedMemory),
            (WRITE, None, CrashCause::SharedMemory),
            (KILLED, None, CrashCause::OomKilled),
            (SEGV, None, CrashCause::WorkerSignal),
            (EXITED, None, CrashCause::WorkerSignal),
            (DISK, None, CrashCause::NoSpace),
            ("", Some(9), CrashCause::OomKilled),
            ("", Some(7), CrashCause::SharedMemory),
            ("ValueError: bad label 7", None, CrashCause::Other),
            (
                "Segmentation fault (core dumped)",
                Some(11),
                CrashCause::Other,
            ),
        ];
        for (text, signal, cause) in cases {
            assert_eq!(crash_cause(text, signal), cause, "{text:?} {signal:?}");
        }
    }

    #[test]
    fn a_crash_is_one_line_with_its_cause_and_the_whole_text_kept() {
        let Failure::Crashed {
            cause,
            message,
            detail,
            signal,
            ..
        } = crash_failure(BUS, None, Some(1))
        else {
            panic!("a crash");
        };
        assert_eq!(cause, CrashCause::SharedMemory);
        assert_eq!(signal, None, "exit 1 is no signal");
        assert!(!message.contains('\n'), "{message}");
        assert!(
            message.starts_with("shared memory exhausted: ERROR: Unexpected bus error"),
            "{message}"
        );
        assert!(message.contains("/dev/shm"), "{message}");
        assert_eq!(detail.as_deref(), Some(BUS));

        let Failure::Crashed {
            cause,
            message,
            signal,
            detail,
            ..
        } = crash_failure("Killed", None, Some(137))
        else {
            panic!("a crash");
        };
        assert_eq!((cause, signal), (CrashCause::OomKilled, Some(9)));
        assert_eq!(
            message.split(" (try").next().unwrap(),
            "killed by SIGKILL, most likely for memory (the OOM killer's signal; dmesg tells): \
             Killed; ended by signal 9 (SIGKILL)"
        );
        let Failure::Crashed { message, .. } =
            crash_failure("MemoryError: cannot grow the cache", None, Some(1))
        else {
            panic!("a crash");
        };
        assert!(
            message.starts_with("out of memory (an allocation was refused): MemoryError"),
            "{message}"
        );
        assert_eq!(detail, None, "the text is the line");
    }

    #[test]
    fn a_long_line_is_cut() {
        let long = format!("RuntimeError: {}", "x".repeat(1000));
        let Failure::Crashed { message, .. } = crash_failure(&long, None, None) else {
            panic!("a crash");
        };
        assert!(message.chars().count() < 300, "{}", message.len());
        assert!(message.contains('…'));
        assert_eq!(signal_of_exit(137), Some(9));
        assert_eq!(signal_of_exit(1), None);
    }
}
