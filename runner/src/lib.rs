//! The `stallscope` command: its command line ([`cli`]), one module per
//! subcommand ([`commands`]) and the terminal reports ([`report`]), over the
//! device-free core (`stallscope-core`) and the engines (`stallscope-torch`,
//! `stallscope-wgpu`, `stallscope-peers`), each a crate of its own.

pub mod cli;
pub mod commands;
pub mod out;
pub mod report;
