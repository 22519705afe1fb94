//! A child process in a process group of its own: started from a
//! [`Spawn`], registered so a second Ctrl-C ends it, its output passed
//! through or read line by line (standard error's last lines kept for
//! messages), waited for against a timeout and the stop flag, ended as a
//! group (SIGTERM first so it can say where it was, then SIGKILL), and how
//! it ended said in words.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::groups::{OwnedGroup, own_group, signal_group};
use crate::stderr::Tail;

/// Where a child's stream goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// To the runner's own stream, untouched (a user's script).
    Inherit,
    /// Standard output only: read line by line ([`Process::next_line`]).
    Lines,
    /// Standard error only: its last N lines kept for messages.
    Tail(usize),
}

/// What to start: a program, its arguments and environment, what to write
/// on its standard input, where its output goes.
pub struct Spawn {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    stdin: Option<Vec<u8>>,
    stdout: Output,
    stderr: Output,
}

impl Spawn {
    /// `program`, with its standard streams the runner's own.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Spawn {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            stdin: None,
            stdout: Output::Inherit,
            stderr: Output::Inherit,
        }
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Write `bytes` on the child's standard input, then close it.
    pub fn stdin(mut self, bytes: Vec<u8>) -> Self {
        self.stdin = Some(bytes);
        self
    }

    pub fn stdout(mut self, o: Output) -> Self {
        self.stdout = o;
        self
    }

    pub fn stderr(mut self, o: Output) -> Self {
        self.stderr = o;
        self
    }

    /// Start it in a process group of its own (the terminal's Ctrl-C then
    /// reaches the runner only; the runner ends the group).
    pub fn start(self) -> std::io::Result<Process> {
        let pipe = |o: Output| match o {
            Output::Inherit => Stdio::inherit(),
            _ => Stdio::piped(),
        };
        let mut c = Command::new(&self.program);
        c.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .stdout(pipe(self.stdout))
            .stderr(pipe(self.stderr))
            .process_group(0);
        let mut child = c.spawn()?;
        let group = own_group(child.id() as i32);
        if let (Some(bytes), Some(mut stdin)) = (self.stdin, child.stdin.take()) {
            // A child that dies at once shows up later, with its stderr.
            let _ = stdin.write_all(&bytes);
        }
        let tail = Tail::default();
        if let (Output::Tail(keep), Some(err)) = (self.stderr, child.stderr.take()) {
            tail.follow(err, keep);
        }
        let lines = child.stdout.take().map(read_lines);
        Ok(Process {
            child,
            _group: group,
            lines,
            tail,
        })
    }
}

/// How a waited-for process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited (or a signal ended it) by itself.
    Exited(ExitStatus),
    /// It ran past the timeout; its group was ended.
    TimedOut,
    /// The stop flag was set (Ctrl-C); its group was ended.
    Stopped,
}

/// A started child; dropping it leaves the process alone (end it first).
pub struct Process {
    child: Child,
    _group: OwnedGroup,
    lines: Option<(Receiver<std::io::Result<String>>, JoinHandle<()>)>,
    tail: Tail,
}

impl Process {
    /// Its process id (and its process group's).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The next line of its standard output (started with
    /// [`Output::Lines`]), waiting at most `wait`; `Disconnected` at its end.
    pub fn next_line(&self, wait: Duration) -> Result<std::io::Result<String>, RecvTimeoutError> {
        match &self.lines {
            Some((rx, _)) => rx.recv_timeout(wait),
            None => Err(RecvTimeoutError::Disconnected),
        }
    }

    /// Wait until it exits, the timeout passes, or `stop` is set; in the
    /// last two cases its group is ended ([`Process::terminate`]).
    pub fn wait(&mut self, timeout: Duration, stop: &AtomicBool) -> std::io::Result<Ending> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(Ending::Exited(status));
            }
            let stopped = stop.load(Ordering::Relaxed);
            if stopped || started.elapsed() > timeout {
                self.terminate(Duration::from_secs(5));
                return Ok(if stopped {
                    Ending::Stopped
                } else {
                    Ending::TimedOut
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM to its group (so the instrumentation writes where it was),
    /// at most `grace` for the leader to go, then SIGKILL to the group.
    pub fn terminate(&mut self, grace: Duration) {
        let pgid = self.child.id() as i32;
        signal_group(pgid, libc::SIGTERM);
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if self.child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        signal_group(pgid, libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// SIGKILL its whole group (a peer harness's DataLoader workers and
    /// SPDL's processes with it) and reap the leader.
    pub fn kill(&mut self) {
        signal_group(self.child.id() as i32, libc::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kill it (`kill`) or wait for it; its exit status (none when killed)
    /// and its stderr's last lines as a message, once its standard output
    /// is read to the end.
    pub fn finish(mut self, kill: bool) -> (Option<ExitStatus>, String) {
        let status = if kill {
            self.kill();
            None
        } else {
            self.child.wait().ok()
        };
        if let Some((_, reader)) = self.lines.take() {
            let _ = reader.join();
        }
        (status, self.tail.message())
    }
}

/// A thread sending every line of `out` as it comes.
fn read_lines(out: ChildStdout) -> (Receiver<std::io::Result<String>>, JoinHandle<()>) {
    let (tx, rx) = channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, reader)
}

/// How a process ended, in words: "with exit status 1", "by signal 9
/// (killed)", "by signal 15", or "abnormally" (no status: it was killed
/// here and reaped).
pub fn describe_status(status: Option<ExitStatus>) -> String {
    match (
        status.and_then(|s| s.code()),
        status.and_then(|s| s.signal()),
    ) {
        (Some(code), _) => format!("with exit status {code}"),
        (None, Some(sig)) if sig == libc::SIGKILL => format!("by signal {sig} (killed)"),
        (None, Some(sig)) => format!("by signal {sig}"),
        _ => "abnormally".into(),
    }
}

/// A short query's output (`python -c ...`), its stderr kept: for the
/// probes that ask a Python what it has.
pub(crate) fn output(program: &OsStr, args: &[&str]) -> std::io::Result<std::process::Output> {
    Command::new(program).args(args).output()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_said_in_words() {
        assert_eq!(
            describe_status(Some(ExitStatus::from_raw(3 << 8))),
            "with exit status 3"
        );
        assert_eq!(
            describe_status(Some(ExitStatus::from_raw(9))),
            "by signal 9 (killed)"
        );
        assert_eq!(
            describe_status(Some(ExitStatus::from_raw(15))),
            "by signal 15"
        );
        assert_eq!(describe_status(None), "abnormally");
    }

    #[test]
    fn a_timeout_ends_the_whole_group() {
        // A shell that starts a grandchild and waits: both must be gone.
        let mut p = Spawn::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(Output::Lines)
            .start()
            .unwrap();
        let grandchild: i32 = p
            .next_line(Duration::from_secs(5))
            .unwrap()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let stop = AtomicBool::new(false);
        let ending = p.wait(Duration::from_millis(200), &stop).unwrap();
        assert_eq!(ending, Ending::TimedOut);
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = |pid: i32| unsafe { libc::kill(pid, 0) } == 0;
        let until = Instant::now() + Duration::from_secs(5);
        while alive(grandchild) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(grandchild), "the grandchild outlived its group");
    }

    #[test]
    fn a_stop_ends_it_and_says_so() {
        let mut p = Spawn::new("sleep").args(["30"]).start().unwrap();
        let stop = AtomicBool::new(true);
        assert_eq!(
            p.wait(Duration::from_secs(60), &stop).unwrap(),
            Ending::Stopped
        );
    }

    #[test]
    fn stdin_lines_and_the_stderr_tail_come_back() {
        let p = Spawn::new("sh")
            .args(["-c", "read x; echo got $x; echo oops >&2; exit 4"])
            .stdin(b"hello\n".to_vec())
            .stdout(Output::Lines)
            .stderr(Output::Tail(3))
            .start()
            .unwrap();
        let line = p.next_line(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(line, "got hello");
        let (status, tail) = p.finish(false);
        assert_eq!(describe_status(status), "with exit status 4");
        assert_eq!(tail, "; its stderr ended with: oops");
    }
}
