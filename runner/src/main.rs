//! The `stallscope` command; everything lives in the library so tests reach it.
fn main() -> std::process::ExitCode {
    stallscope::cli::main()
}
