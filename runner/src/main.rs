//! The `stallscope` command; everything lives in the library so tests reach it.
use std::io::Write;

fn main() {
    let code = stallscope::cli::main();
    // `ExitCode` keeps its value to itself; it is one of 0..=255.
    let code = (0..=255u8)
        .find(|&n| std::process::ExitCode::from(n) == code)
        .map_or(1, i32::from);
    // Every file the command wrote is complete by now (bundles are synced and
    // renamed; nothing is left buffered but the standard streams). What is
    // left of an ordinary exit is libtorch's static destructors, a quarter of
    // a second on every command, including the ones that never touch a
    // device: flush the streams and leave without them.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process at once; no Rust object is used after.
    unsafe { libc::_exit(code) }
}
