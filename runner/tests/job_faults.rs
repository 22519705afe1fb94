//! `stallscope job` when the script goes wrong (issue 19, item 8), each
//! fault through the real command on a real training script
//! (fixtures/job/faults/, plain PyTorch from the peers venv): the exit
//! status, a valid bundle, one clear message that names the fault and what
//! was expected, and what was measured before the fault kept. Also
//! Lightning's `Trainer`, measured and swept like any script.
//!
//! The script failing before its first step is
//! `a_script_that_fails_first_is_one_clear_failure` in job.rs.
//!
//! Runtimes (2 loaded cores, load 8; a Python process with torch takes
//! about 6 s to start, with Lightning about 10 s) are on each test.

#[allow(dead_code)]
mod util;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use stallscope_bundle::{Bundle, Configuration, Failure, ParamValue, TimingMode};
use util::*;

/// `stallscope job OPTIONS --out OUT -- python SCRIPT ARGS` (one repeat).
fn job(out: &Path, options: &[&str], script: &str, args: &[&str]) -> Command {
    let mut c = stallscope();
    c.args(["job", "--repeats", "1"])
        .args(options)
        .arg("--out")
        .arg(out)
        .arg("--")
        .arg(peers_python())
        .arg(job_fixture(script))
        .args(args)
        .env("OMP_NUM_THREADS", "1");
    c
}

/// The only configuration of the job experiment.
fn only(b: &Bundle) -> &Configuration {
    let e = b.experiment("job").expect("the job experiment");
    assert_eq!(e.configurations.len(), 1);
    &e.configurations[0]
}

/// The failure's message (every kind the job records carries one).
fn message(c: &Configuration) -> String {
    match c.failure.as_ref().expect("a failure") {
        Failure::Error { message }
        | Failure::Script { message, .. }
        | Failure::Interrupted { message }
        | Failure::Panic { message }
        | Failure::WorkerError { message, .. } => message.clone(),
        other => format!("{other:?}"),
    }
}

/// The whole-run steps of the configuration's run, if it kept one.
fn whole_run_steps(c: &Configuration) -> Option<u64> {
    c.runs
        .iter()
        .find(|r| r.timing_mode == TimingMode::WholeRun)
        .and_then(|r| r.whole_run.as_ref())
        .and_then(|w| w.steps)
}

/// The processes of the script whose command line holds `marker` (this
/// test's own folder): the runner itself and zombies left out.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let runner = cmdline.starts_with(&format!("{} ", env!("CARGO_BIN_EXE_stallscope")));
        if cmdline.contains(marker) && !runner {
            found.push(format!("{name}: {cmdline}"));
        }
    }
    found
}

/// Wait (at most 10 s) until no process holds `marker`; the ones left.
fn leftovers(marker: &str) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_with(marker);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The runner of `c` in a process group of its own (so a test can signal
/// it as a terminal would), its standard error into `dir/stderr`.
fn in_own_group(mut c: Command, dir: &Path) -> Child {
    c.process_group(0)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .unwrap()
}

/// Poll `ready` every 50 ms for at most `limit_s` seconds; panic, with the
/// runner's standard error, when the limit passes or the runner ends first.
fn wait_while_running(
    child: &mut Child,
    limit_s: u64,
    what: &str,
    stderr: &dyn Fn() -> String,
    mut ready: impl FnMut() -> bool,
) {
    let until = Instant::now() + Duration::from_secs(limit_s);
    while !ready() {
        assert!(
            Instant::now() < until,
            "waited in vain for {what}: {}",
            stderr()
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the job ended before {what}: {}",
            stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_exit(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "{}", text(o));
}

/// Mid-window exception (ValueError at batch 10: 3 warm-up batches, 7 window
/// steps done of 20): exit 1, the exception, its traceback's last line, the
/// steps done of those asked and the script's exit status in the message,
/// and the 7 steps measured kept as a partial run. About 15 s.
#[test]
fn a_script_that_fails_mid_window_keeps_its_steps() {
    let dir = temp_dir("job-mid-window");
    let out = dir.path().join("out");
    let o = job(
        &out,
        &["--steps", "20", "--warmup", "3"],
        "faults/fails_mid_window.py",
        &["--fail-at", "10"],
    )
    .output()
    .unwrap();
    assert_exit(&o, 1);
    // The script's own traceback still reached the terminal.
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("ValueError: batch 10 holds a corrupt record"),
        "{}",
        text(&o)
    );
    let b = valid_bundle(&out.join("bundle.json"));
    let c = only(&b);
    let m = message(c);
    assert!(
        m.contains("ValueError: batch 10 holds a corrupt record"),
        "{m}"
    );
    assert!(m.contains("7 of 20"), "the steps done of those asked: {m}");
    assert!(m.contains("exit status 1"), "{m}");
    // Nothing measured lost: the window's 7 steps before the exception.
    assert_eq!(whole_run_steps(c), Some(7), "{:?}", c.runs);
    assert_report_matches(&o, &out.join("bundle.json"));
}

/// One epoch of 10 batches, 3 of them warm-up, 20 steps asked: the script
/// ends normally (exit 0) after 7. Exit 1, "7 of 20" in the message, and the
/// 7 steps kept. About 15 s.
#[test]
fn a_script_that_ends_with_fewer_steps_than_asked_says_how_many() {
    let dir = temp_dir("job-short");
    let out = dir.path().join("out");
    let o = job(
        &out,
        &["--steps", "20", "--warmup", "3"],
        "faults/short_epoch.py",
        &["--samples", "40"],
    )
    .output()
    .unwrap();
    assert_exit(&o, 1);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("training done"),
        "{}",
        text(&o)
    );
    let b = valid_bundle(&out.join("bundle.json"));
    let c = only(&b);
    let m = message(c);
    assert!(m.contains("7 of 20"), "the steps done of those asked: {m}");
    assert!(m.contains("exit status 0"), "{m}");
    assert_eq!(whole_run_steps(c), Some(7), "{:?}", c.runs);
}

/// `sys.exit(3)` and `os._exit(4)` at batch 8 (3 warm-up, 5 steps done of
/// 20): exit 1; the message names the call, its status and the steps; the
/// 5 steps kept. About 30 s (two jobs).
#[test]
fn a_script_that_calls_sys_exit_or_os_exit_says_so() {
    for (how, status) in [("sys.exit", "3"), ("os._exit", "4")] {
        let dir = temp_dir("job-exit");
        let out = dir.path().join("out");
        let o = job(
            &out,
            &["--steps", "20", "--warmup", "3"],
            "faults/exits_mid_window.py",
            &["--how", how, "--at", "8", "--status", status],
        )
        .output()
        .unwrap();
        assert_exit(&o, 1);
        let b = valid_bundle(&out.join("bundle.json"));
        let c = only(&b);
        let m = message(c);
        assert!(m.contains(&format!("({how})")), "{how}: {m}");
        assert!(m.contains(&format!("exit status {status}")), "{how}: {m}");
        assert!(m.contains("5 of 20"), "{how}: {m}");
        assert_eq!(whole_run_steps(c), Some(5), "{how}: {:?}", c.runs);
    }
}

/// A script that builds its DataLoader and then waits: stopped at
/// `--timeout 20`, exit 1, the message says the timeout and that the
/// measured loader was never iterated; no process of it is left. A script
/// that ends without iterating says so at once. About 35 s.
#[test]
fn a_script_that_never_iterates_its_loader_is_stopped_at_the_timeout() {
    let dir = temp_dir("job-never-iterates");
    let out = dir.path().join("out");
    let started = Instant::now();
    let o = job(
        &out,
        &["--steps", "5", "--warmup", "1", "--timeout", "20"],
        "faults/never_iterates.py",
        &[],
    )
    .output()
    .unwrap();
    let took = started.elapsed();
    assert_exit(&o, 1);
    assert!(took < Duration::from_secs(60), "took {took:?}");
    let b = valid_bundle(&out.join("bundle.json"));
    let m = message(only(&b));
    assert!(m.contains("timeout (20 s)"), "{m}");
    assert!(never_iterated(&m), "{m}");
    // One unit failed: the diagnostic mode did not run after it.
    assert!(only(&b).runs.is_empty());

    let out = dir.path().join("out-ends");
    let o = job(
        &out,
        &["--steps", "5", "--warmup", "1", "--timeout", "120"],
        "faults/never_iterates.py",
        &["--wait-s", "0"],
    )
    .output()
    .unwrap();
    assert_exit(&o, 1);
    let b = valid_bundle(&out.join("bundle.json"));
    let m = message(only(&b));
    assert!(never_iterated(&m), "{m}");
    assert!(m.contains("exit status 0"), "{m}");
}

/// The message of a script that never iterated a DataLoader: the end
/// record's words, or the runner's own when there is none.
fn never_iterated(m: &str) -> bool {
    m.contains("before it iterated a DataLoader") || m.contains("was never iterated")
}

/// The Dataset hangs at sample 80 (batch 10), read by one worker: 3
/// warm-up batches, 7 steps, then the loop waits in next() forever. At
/// `--timeout 30` the process group (the script and its worker) is stopped:
/// exit 1, the message says the timeout, the steps done and that it waited
/// in next(); the 7 steps kept; no process of the script left. About 35 s.
#[test]
fn a_script_that_hangs_is_stopped_with_its_workers_at_the_timeout() {
    let dir = temp_dir("job-hangs");
    let marker = dir.path().to_str().unwrap().to_string();
    let out = dir.path().join("out");
    let o = job(
        &out,
        &["--steps", "20", "--warmup", "3", "--timeout", "30"],
        "faults/hangs.py",
        &["--hang-at", "80", "--workers", "1", "--marker", &marker],
    )
    .output()
    .unwrap();
    assert_exit(&o, 1);
    let left = leftovers(&marker);
    assert!(left.is_empty(), "left running: {left:?}");
    let b = valid_bundle(&out.join("bundle.json"));
    let c = only(&b);
    let m = message(c);
    assert!(m.contains("timeout (30 s)"), "{m}");
    assert!(m.contains("it was waiting for data"), "{m}");
    assert!(m.contains("7 of 20"), "{m}");
    assert_eq!(whole_run_steps(c), Some(7), "{:?}", c.runs);
}

/// An IterableDataset, swept to 2 workers: both configurations measured in
/// both modes (an IterableDataset has no length: nothing needs one), and
/// with 2 workers the bundle says the stream is duplicated (every worker
/// runs the whole iterator). About 35 s.
#[test]
fn an_iterable_dataset_is_measured_and_its_duplication_under_workers_said() {
    let dir = temp_dir("job-iterable");
    let out = dir.path().join("out");
    let o = job(
        &out,
        &["--steps", "10", "--warmup", "2", "--sweep", "num_workers=2"],
        "faults/iterable.py",
        &[],
    )
    .output()
    .unwrap();
    assert_exit(&o, 0);
    let b = valid_bundle(&out.join("bundle.json"));
    let e = b.experiment("job").unwrap();
    // Your settings, again (the A/A pair), and the sweep's point.
    assert_eq!(e.configurations.len(), 3);
    for (c, workers) in e.configurations.iter().zip([0i64, 0, 2]) {
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        assert_eq!(
            c.params.get("actual_num_workers"),
            Some(&ParamValue::Int(workers))
        );
        assert_eq!(whole_run_steps(c), Some(10), "{}", c.id);
        assert!(
            c.runs
                .iter()
                .any(|r| r.timing_mode == TimingMode::Diagnostic),
            "{}",
            c.id
        );
    }
    // The duplication is said where the bundle is read (a configuration's
    // parameter, or a note), not only in the unit's records.
    let json = serde_json::to_string(&b).unwrap();
    assert!(
        json.contains("IterableDataset") && json.contains("duplicated"),
        "the bundle does not say the dataset is an IterableDataset duplicated across workers"
    );
}

/// Ctrl-C as a terminal sends it (SIGINT to the runner's foreground
/// process group; the script runs in a group of its own) while the sweep's
/// configuration (2 workers, after your settings and their A/A copy) runs:
/// exit 130, the configurations before it kept in a valid bundle, it marked
/// interrupted, and no process of the script (main or worker) left.
#[test]
fn ctrl_c_stops_the_whole_tree_and_keeps_a_partial_bundle() {
    let dir = temp_dir("job-ctrl-c");
    let marker = dir.path().to_str().unwrap().to_string();
    let out = dir.path().join("out");
    let mut child = in_own_group(
        job(
            &out,
            &["--steps", "6", "--warmup", "1", "--sweep", "num_workers=2"],
            "faults/slow_loop.py",
            &["--delay-ms", "50", "--marker", &marker],
        ),
        dir.path(),
    );
    let stderr = || std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
    let bundle = out.join("bundle.json");
    // Until the sweep's configuration's script and a worker of it run (the
    // ones before it have none). Not `wait_for_a_saved_configuration`:
    // the bundle saved between a job's units does not validate yet (no
    // `environment.device`, the script's own value of a swept key missing
    // until the experiment ends), so it would wait to the end.
    let second = out.join("units").join("num_workers=2-r0-whole_run");
    wait_while_running(
        &mut child,
        180,
        "the second configuration to start",
        &stderr,
        || second.exists() && processes_with(&marker).len() >= 2,
    );
    // SAFETY: a signal to the runner's own process group, made above.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}: {}", stderr());
    let left = leftovers(&marker);
    assert!(left.is_empty(), "left running: {left:?}");
    let b = valid_bundle(&bundle);
    let e = b.experiment("job").unwrap();
    assert_eq!(e.configurations.len(), 3);
    let (first, second) = (&e.configurations[0], &e.configurations[2]);
    assert!(first.failure.is_none(), "{:?}", first.failure);
    assert_eq!(whole_run_steps(first), Some(6));
    assert!(
        matches!(second.failure, Some(Failure::Interrupted { .. })),
        "{:?}",
        second.failure
    );
}

/// Ctrl-C twice (the second while the first stop still waits out a script
/// that ignores SIGTERM): the runner quits at once with 130, and the
/// script's process group, which is its own, goes with it.
#[test]
fn a_second_ctrl_c_quits_at_once_and_leaves_no_script_running() {
    let dir = temp_dir("job-ctrl-c-twice");
    let marker = dir.path().to_str().unwrap().to_string();
    let out = dir.path().join("out");
    let mut child = in_own_group(
        job(
            &out,
            &["--steps", "500", "--warmup", "1"],
            "faults/slow_loop.py",
            &["--delay-ms", "5", "--marker", &marker, "--ignore-sigterm"],
        ),
        dir.path(),
    );
    let stderr = || std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
    // Until the measured window is open (the script has set SIGTERM aside
    // by then: it does so before it builds its DataLoader).
    let unit = out.join("units").join("script-r0-whole_run");
    let opened = || {
        std::fs::read_dir(&unit)
            .into_iter()
            .flatten()
            .flatten()
            .any(|f| {
                std::fs::read_to_string(f.path()).is_ok_and(|t| t.contains("\"type\":\"window\""))
            })
    };
    wait_while_running(&mut child, 120, "the window to open", &stderr, opened);
    let group = -(child.id() as i32);
    // SAFETY: signals to the runner's own process group, made above.
    unsafe { libc::kill(group, libc::SIGINT) };
    // The first stop is under way (SIGTERM sent, ignored: 5 s to SIGKILL).
    std::thread::sleep(Duration::from_millis(500));
    let quit = Instant::now();
    // SAFETY: as above.
    unsafe { libc::kill(group, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}: {}", stderr());
    assert!(
        quit.elapsed() < Duration::from_secs(3),
        "the second Ctrl-C took {:?}",
        quit.elapsed()
    );
    let left = leftovers(&marker);
    assert!(left.is_empty(), "left running: {left:?}");
}

/// Lightning's `Trainer` (fixtures/job/train_lightning.py, no validation
/// loader): its training DataLoader is the first iterated, so the default
/// `--loader 0` (with `--loader 1` the script ends with the measured loader
/// never iterated). Swept to 2 workers: both modes per configuration, the
/// DataLoader's settings recorded, `actual_num_workers` the sweep's point,
/// Lightning re-instantiating the loader notwithstanding. About 70 s.
#[test]
fn a_lightning_trainer_is_measured_and_swept() {
    let dir = temp_dir("job-lightning");
    let out = dir.path().join("out");
    let o = job(
        &out,
        &[
            "--steps",
            "10",
            "--warmup",
            "3",
            "--sweep",
            "num_workers=0,2",
        ],
        "train_lightning.py",
        &[],
    )
    .output()
    .unwrap();
    assert_exit(&o, 0);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("fit done"));
    let b = valid_bundle(&out.join("bundle.json"));
    let e = b.experiment("job").unwrap();
    assert_eq!(e.configurations.len(), 3, "the script's own, then 0 and 2");
    for (c, workers) in e.configurations.iter().zip([0i64, 0, 2]) {
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        assert_eq!(
            c.params.get("actual_num_workers"),
            Some(&ParamValue::Int(workers)),
            "{}",
            c.id
        );
        for key in [
            "actual_batch_size",
            "actual_pin_memory",
            "actual_dataset_len",
        ] {
            assert!(c.params.contains_key(key), "{}: {key}", c.id);
        }
        assert_eq!(
            c.params.get("actual_batch_size"),
            Some(&ParamValue::Int(64))
        );
        let whole = c
            .runs
            .iter()
            .find(|r| r.timing_mode == TimingMode::WholeRun)
            .and_then(|r| r.whole_run.as_ref())
            .unwrap_or_else(|| panic!("{}: no whole-run run", c.id));
        assert_eq!(
            (whole.steps, whole.samples),
            (Some(10), Some(640)),
            "{}",
            c.id
        );
        let diag = c
            .runs
            .iter()
            .find(|r| r.timing_mode == TimingMode::Diagnostic)
            .and_then(|r| r.steps.as_ref())
            .unwrap_or_else(|| panic!("{}: no diagnostic run", c.id));
        assert_eq!(diag.next_wait_ns.len(), 10, "{}", c.id);
    }
}

/// Lightning with a validation loader: the sanity check iterates it first
/// (iteration index 0, batches of 32); the steps and what the job records
/// as the DataLoader it ran with are the training loader's (batches of
/// 64), the one that fed the optimizer's steps. About 40 s.
#[test]
fn a_lightning_trainer_with_validation_is_measured_with_loader_1() {
    let dir = temp_dir("job-lightning-val");
    let out = dir.path().join("out");
    let o = job(
        &out,
        &["--steps", "8", "--warmup", "2", "--loader", "1"],
        "train_lightning_val.py",
        &[],
    )
    .output()
    .unwrap();
    assert_exit(&o, 0);
    let b = valid_bundle(&out.join("bundle.json"));
    let c = only(&b);
    assert!(c.failure.is_none(), "{:?}", c.failure);
    assert_eq!(
        c.params.get("actual_batch_size"),
        Some(&ParamValue::Int(64)),
        "the training loader"
    );
    let whole = c
        .runs
        .iter()
        .find(|r| r.timing_mode == TimingMode::WholeRun)
        .and_then(|r| r.whole_run.as_ref())
        .unwrap();
    assert_eq!((whole.steps, whole.samples), (Some(8), Some(8 * 64)));
}

/// A Dataset that raises on sample 40 (its 6th batch of 8, after 2 warm-up
/// steps): what stallscope says of it is the user's exception, its text and
/// the line of their own code, in a few lines, with no frame of the
/// harness or of PyTorch; the whole traceback is kept in the bundle.
#[test]
fn a_failing_script_is_shown_as_its_own_exception_and_line() {
    let dir = temp_dir("job-bad-sample");
    let out = dir.path().join("out");
    let o = job(
        &out,
        &["--steps", "20", "--warmup", "2"],
        "faults/bad_sample.py",
        &["--bad", "40"],
    )
    .output()
    .unwrap();
    assert_exit(&o, 1);
    let b = valid_bundle(&out.join("bundle.json"));
    let c = only(&b);
    let Some(Failure::Script {
        message,
        exception,
        at,
        traceback,
    }) = &c.failure
    else {
        panic!("not the script's exception: {:?}", c.failure);
    };
    assert_eq!(exception.as_deref(), Some("ValueError"));
    assert_eq!(at.as_deref(), Some("bad_sample.py:20 in __getitem__"));
    assert!(
        message.starts_with("ValueError: sample 40 is corrupt, at bad_sample.py:20"),
        "{message}"
    );
    let tb = traceback.as_deref().unwrap_or("");
    assert!(tb.starts_with("Traceback (most recent call last)"), "{tb}");
    assert!(tb.contains("raise ValueError"), "{tb}");
    // What stallscope printed of it: the configuration's failure lines.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let said: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("your script raised"))
        .take_while(|l| {
            !l.trim().is_empty() && (l.contains("your script raised") || l.starts_with("    "))
        })
        .collect();
    assert!(!said.is_empty(), "{stdout}");
    assert!(
        said.len() < 10,
        "{} lines:\n{}",
        said.len(),
        said.join("\n")
    );
    let said = said.join(" ");
    for harness in [
        "stallscope_job",
        "stallscope_steps",
        "site-packages",
        "window.py",
        "dataloader.py",
    ] {
        assert!(!said.contains(harness), "{harness} in: {said}");
    }
    assert!(said.contains("ValueError: sample 40 is corrupt"), "{said}");
    assert!(said.contains("bad_sample.py:20"), "{said}");
    // The script's own traceback, as Python printed it, has no frame of
    // stallscope's patches between the script and the DataLoader.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("ValueError: sample 40 is corrupt"),
        "{stderr}"
    );
    assert!(!stderr.contains("stallscope_job/"), "{stderr}");
}
