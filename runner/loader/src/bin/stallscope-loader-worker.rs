//! The process worker of the native loader: started by the loader (never by
//! people), it builds batches into shared memory. It links no libtorch, so it
//! starts in milliseconds.

use std::process::ExitCode;

fn main() -> ExitCode {
    match stallscope_loader::worker_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stallscope-loader-worker: {e}");
            ExitCode::from(2)
        }
    }
}
