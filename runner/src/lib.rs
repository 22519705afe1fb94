//! The `stallscope` command: its command line ([`cli`]), one module per
//! subcommand ([`commands`]) and the terminal reports ([`report`]), over the
//! device-free core (`stallscope-core`), the back ends (`stallscope-torch`,
//! `stallscope-wgpu`; the Python engines, `stallscope-peers`, through the
//! torch back end), the owner of Python processes (`stallscope-python`) and
//! the job (`stallscope-job`), each a crate of its own.

pub mod cli;
pub mod commands;
pub mod out;
pub mod report;
