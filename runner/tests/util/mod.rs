//! Helpers for the runner's end-to-end tests: run the real `stallscope`
//! binary (real libtorch, on the CPU), read back and validate its bundle.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use stallscope_bundle::{Bundle, parse_bundle, validate};
use tempfile::TempDir;

/// A fresh, empty folder for one test, removed when the test ends.
pub fn temp_dir(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("stallscope-{name}-"))
        .tempdir()
        .expect("a temporary folder")
}

pub fn stallscope() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stallscope"));
    c.env_remove("STALLSCOPE_INJECT_PANIC");
    c
}

pub fn run(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = stallscope();
    c.args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("run stallscope")
}

pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Read a bundle the way the viewer does (parse + validate); panic with the
/// problems if it is not valid.
pub fn valid_bundle(path: &Path) -> Bundle {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let bundle = parse_bundle(&bytes).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    let problems = validate(&bundle);
    assert!(problems.is_empty(), "{}: {problems:?}", path.display());
    bundle
}

/// A tiny suite covering every experiment kind, seconds on 2 CPU cores.
pub const TINY_SUITE: &str = r#"
title = "tiny"
seed = 7
repeats = 2
epochs = 2

[[experiment]]
id = "compute"
kind = "compute"
model = "linear"
features = 64
classes = 4
batch_sizes = [32, 64]
steps = 8

[[experiment]]
id = "batch_sweep"
kind = "batch_sweep"
model = "linear"
data = "tensor"
samples = 1024
batch_sizes = [64, 128]

[[experiment]]
id = "transfer"
kind = "transfer"
sizes_kib = [4, 64]
copies = 10

[[experiment]]
id = "oom_probe"
kind = "oom_probe"
"#;

pub fn write_suite(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write suite");
    p
}

pub fn pick<'a, T>(rng: &mut stallscope_loader::Rng, items: &'a [T]) -> &'a T {
    &items[rng.below(items.len() as u64) as usize]
}

/// A non-empty subset of `items`, in their order, as a TOML array.
pub fn subset<T: std::fmt::Display>(rng: &mut stallscope_loader::Rng, items: &[T]) -> String {
    let mut chosen: Vec<String> = Vec::new();
    while chosen.is_empty() {
        chosen = items
            .iter()
            .filter(|_| rng.coin())
            .map(ToString::to_string)
            .collect();
    }
    format!("[{}]", chosen.join(", "))
}

/// `stallscope run SUITE --device cpu --out OUT` with `envs`.
pub fn run_on_cpu(suite: &Path, out: &Path, envs: &[(&str, &str)]) -> Output {
    run(
        &[
            "run",
            suite.to_str().expect("a UTF-8 path"),
            "--device",
            "cpu",
            "--out",
            out.to_str().expect("a UTF-8 path"),
        ],
        envs,
    )
}

/// Wait (at most 120 s) until the bundle at `path` holds a finished
/// configuration (one with runs), failing if a process of `running` ends
/// first: the moment a stop test signals a run.
pub fn wait_for_a_saved_configuration(path: &Path, running: &mut [Child]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            Instant::now() < deadline,
            "no configuration finished in time"
        );
        for c in running.iter_mut() {
            assert!(
                c.try_wait().unwrap().is_none(),
                "a run ended before the stop"
            );
        }
        if let Ok(bytes) = std::fs::read(path)
            && let Ok(b) = stallscope_bundle::read_bundle(&bytes)
            && b.experiments[0]
                .configurations
                .iter()
                .any(|c| !c.runs.is_empty())
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The peers' Python: `STALLSCOPE_PYTHON`, else the environment `cargo
/// xtask setup --peers` makes in the cache. It must exist.
pub fn peers_python() -> PathBuf {
    let python = std::env::var_os("STALLSCOPE_PYTHON")
        .map(PathBuf::from)
        .or_else(stallscope_python::cached_python)
        .expect("a place for the peers' Python");
    assert!(
        python.exists(),
        "{} does not exist: run `cargo xtask setup --peers` (or STALLSCOPE_PEERS=0 to skip)",
        python.display()
    );
    python
}

/// The peers' Python, or `None` with a message naming `what` was not
/// tested when `STALLSCOPE_PEERS=0` says to skip.
pub fn peers_or_skip(what: &str) -> Option<PathBuf> {
    if std::env::var("STALLSCOPE_PEERS").as_deref() == Ok("0") {
        eprintln!("SKIPPED: STALLSCOPE_PEERS=0; {what} not tested");
        return None;
    }
    Some(peers_python())
}

/// The harness of this checkout, not a cached copy.
pub fn harness_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../python")
        .display()
        .to_string()
}

/// A training script of `fixtures/job/`.
pub fn job_fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/job")
        .join(name);
    p.to_str().unwrap().to_string()
}

/// A TCP port free on this machine now (for a launcher's master port).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `stallscope report` of the bundle a job or run wrote prints exactly what
/// that command printed on stdout (one printer for both).
pub fn assert_report_matches(printed: &Output, bundle: &Path) {
    let again = run(&["report", bundle.to_str().unwrap()], &[]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let (a, b) = (
        String::from_utf8_lossy(&printed.stdout),
        String::from_utf8_lossy(&again.stdout),
    );
    assert!(
        a.ends_with(b.as_ref()),
        "the command printed:\n{a}\n--- report prints:\n{b}"
    );
}
