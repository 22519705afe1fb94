//! The one owner of every Python process stallscope starts: the peer
//! engines' harness, the user's training command under `stallscope job`
//! (torchrun and its ranks included), and the short queries that ask a
//! Python what it has. Its clients (`stallscope-peers`, `stallscope-job`,
//! `stallscope-torch`'s search for CUDA's libtorch) never create a process
//! themselves: `cargo xtask structure` fails on a `Command::new` outside
//! this crate.
//!
//! - `find`: which Python (`--python`, `$STALLSCOPE_PYTHON`, the cached
//!   peers environment), probed once for torch, SPDL, DALI and torchdata;
//! - [`packages_dir`]: the embedded `python/stallscope_*` packages, written
//!   once into the cache;
//! - [`Process`]: a child in a process group of its own (so a terminal's
//!   Ctrl-C reaches the runner only), registered so a second Ctrl-C ends it
//!   ([`kill_all_groups`]); its output passed through or read line by line;
//!   waited for with a timeout and the stop flag; ended as a group (SIGTERM,
//!   then SIGKILL); how it ended as an [`Ending`];
//! - `json_lines`: the one reader of JSON-lines records, from a pipe or a
//!   file, every bad line named with its source and line number;
//! - [`torch_lib_dirs`]: where the Pythons here keep torch's `lib/`.

mod embed;
mod find;
mod groups;
mod json_lines;
mod process;
mod stderr;
mod torch_lib;

pub use embed::packages_dir;
pub use find::{PythonEnv, cached_python, env, set_python};
pub use groups::kill_all_groups;
pub use json_lines::{JsonLineError, parse_line, read_file};
pub use process::{Ending, Output, Process, Spawn, describe_status};
pub use torch_lib::torch_lib_dirs;
