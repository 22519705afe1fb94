//! Starting the harness in its own process group with the request on its
//! standard input, a thread per output stream (stdout's lines into a
//! channel, the last lines of stderr kept for messages), and killing the
//! whole group.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use stallscope_core::driver::UnitError;

use super::super::{PeerUnit, harness, python};

/// Lines of the harness's stderr kept for messages.
const STDERR_LINES: usize = 12;

/// A started harness and the threads reading its output.
pub(super) struct Harness {
    child: Child,
    lines: Receiver<std::io::Result<String>>,
    reader: JoinHandle<()>,
    stderr: StderrTail,
}

impl Harness {
    /// Start the unit's harness and write its request.
    pub(super) fn start(u: &PeerUnit) -> Result<Self, UnitError> {
        let mut child = spawn(u)?;
        let request = serde_json::to_string(&u.request).expect("the request serializes");
        if let Some(mut stdin) = child.stdin.take() {
            // A harness that dies at once shows up later, with its stderr.
            let _ = stdin.write_all(request.as_bytes());
            let _ = stdin.write_all(b"\n");
        }
        let stderr = StderrTail::default();
        if let Some(err) = child.stderr.take() {
            stderr.follow(err);
        }
        let out = child.stdout.take().expect("stdout is piped");
        let (lines, reader) = read_lines(out);
        Ok(Harness {
            child,
            lines,
            reader,
            stderr,
        })
    }

    /// The harness's process id (and its process group's).
    pub(super) fn id(&self) -> u32 {
        self.child.id()
    }

    /// The next line of its stdout, waiting at most `wait`.
    pub(super) fn next_line(
        &self,
        wait: Duration,
    ) -> Result<std::io::Result<String>, RecvTimeoutError> {
        self.lines.recv_timeout(wait)
    }

    /// Kill the harness's whole group: DataLoader workers and SPDL's
    /// processes with it.
    pub(super) fn kill(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: kill(2) on the group this runner created for the child.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kill a harness that failed, or wait for one that did not; its exit
    /// status (none when killed) and its stderr's last lines, once its
    /// stdout is read to the end.
    pub(super) fn end(mut self, failed: bool) -> (Option<ExitStatus>, StderrTail) {
        let status = if failed {
            self.kill();
            None
        } else {
            self.child.wait().ok()
        };
        let _ = self.reader.join();
        (status, self.stderr)
    }
}

/// The harness process, in a process group of its own.
fn spawn(u: &PeerUnit) -> Result<Child, UnitError> {
    let env = python::available(u.engine).map_err(UnitError::Failed)?;
    let dir = harness::dir().map_err(UnitError::Failed)?;
    Command::new(&env.python)
        .args(["-m", "stallscope_peer"])
        .env("PYTHONPATH", &dir)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            UnitError::Failed(format!(
                "cannot start the {} harness with {}: {e}",
                u.engine.as_str(),
                env.python.display()
            ))
        })
}

/// A thread sending every line of the harness's stdout as it comes.
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

/// The last lines of the harness's stderr.
#[derive(Default)]
pub(super) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// Keep the last lines of `err`, in a thread of its own.
    fn follow(&self, err: ChildStderr) {
        let tail = Arc::clone(&self.0);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut t = tail.lock().expect("stderr tail");
                if t.len() == STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
    }

    /// The tail for a message ("; its stderr ended with: …"), or nothing.
    pub(super) fn message(&self) -> String {
        // Give the stderr thread a moment to read the last words.
        std::thread::sleep(Duration::from_millis(50));
        let t = self.0.lock().expect("stderr tail");
        if t.is_empty() {
            String::new()
        } else {
            format!(
                "; its stderr ended with: {}",
                t.iter().cloned().collect::<Vec<_>>().join(" | ")
            )
        }
    }
}
