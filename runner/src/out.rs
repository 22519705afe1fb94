//! Standard output for every command. A reader that closes the pipe early
//! (`stallscope report B.json | head`) ends the command the way Unix tools
//! end: quietly, by SIGPIPE (status 141 in a shell), nothing on stderr;
//! what the command wrote to files is complete before it prints. Any other
//! write error is one line on stderr and status 2.

use std::io::Write;

/// Write `text` to standard output, flushed.
pub fn write(text: &str) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        gone(&e);
    }
}

fn gone(e: &std::io::Error) -> ! {
    let _ = std::io::stderr().flush();
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        // SAFETY: restore the default action of SIGPIPE (Rust ignores it)
        // and raise it: the process ends as `head`'s writers conventionally do.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::raise(libc::SIGPIPE);
        }
    }
    eprintln!("error: writing to standard output: {e}");
    // SAFETY: `_exit` ends the process at once; nothing is used after.
    unsafe { libc::_exit(2) }
}

/// `println!` to [`write`].
#[macro_export]
macro_rules! outln {
    () => { $crate::out::write("\n") };
    ($($t:tt)*) => { $crate::out::write(&format!("{}\n", format_args!($($t)*))) };
}

/// `print!` to [`write`].
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::out::write(&format!($($t)*)) };
}
