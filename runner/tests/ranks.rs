//! Ranks end to end through the real binary on the CPU: real torchrun from
//! the peers venv (2 and 4 ranks), Slurm's variables set by the test on
//! processes it spawns, a rank slowed on purpose, a rank killed mid-epoch,
//! a rank stopped by Ctrl-C, a configuration failing on one rank only, an
//! unreachable master; every per-rank bundle validates and `stallscope
//! merge` combines them. The sampler's shares are compared with the real
//! `torch.utils.data.DistributedSampler`.

#[allow(dead_code)]
mod util;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use stallscope_bundle::analysis::rank_analysis_in;
use stallscope_bundle::{Bundle, Failure, RunState};
use stallscope_loader::{Sampler, Shard, shard_batches};
use util::*;

/// Two experiments (the in-loop feed and the native loader), both modes.
const SUITE: &str = r#"
title = "ranks, tiny"
seed = 7
repeats = 1
epochs = 2
torch_threads = 1
rank_timeout_s = 20

[[experiment]]
id = "batch_sweep"
kind = "batch_sweep"
model = "linear"
data = "tensor"
samples = 1000
batch_sizes = [50]

[[experiment]]
id = "loader"
kind = "loader"
model = "linear"
features = 16
classes = 4

[experiment.loader]
source = "tensor"
samples = 500
batch_size = 25
workers = [0, 2]
worker_kinds = ["threads"]
"#;

const RANK_VARS: &[&str] = &[
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RESTART_COUNT",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_NODEID",
    "SLURM_JOB_ID",
    "SLURM_JOB_NODELIST",
    "STALLSCOPE_RANKS",
    "STALLSCOPE_ABORT_RANK_AT",
];

/// The peers venv's `bin/` (torchrun, python); a clear failure without it.
fn venv_bin() -> PathBuf {
    let python = std::env::var_os("STALLSCOPE_PYTHON")
        .map(PathBuf::from)
        .or_else(stallscope_python::cached_python)
        .expect("a place for the peers' Python");
    let bin = python
        .parent()
        .expect("python in a bin/ folder")
        .to_path_buf();
    assert!(
        bin.join("torchrun").exists() && python.exists(),
        "{} has no torchrun/python: run `cargo xtask setup --peers` (the rank tests need \
         torchrun and torch from the peers venv)",
        bin.display()
    );
    bin
}

/// The rank tests run one at a time: several ranks each on 2 cores already
/// fill the machine, and the slowed-rank shares need a quiet one.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn clean(c: &mut Command) -> &mut Command {
    for v in RANK_VARS {
        c.env_remove(v);
    }
    c.env_remove("STALLSCOPE_INJECT_PANIC")
}

fn torchrun(ranks: u32, suite: &Path, out: &Path) -> Output {
    let mut c = Command::new(venv_bin().join("torchrun"));
    clean(&mut c).args([
        "--no-python",
        "--nproc-per-node",
        &ranks.to_string(),
        "--master-port",
        &free_port().to_string(),
        env!("CARGO_BIN_EXE_stallscope"),
        "run",
        suite.to_str().unwrap(),
        "--device",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    c.output().expect("run torchrun")
}

/// `world` processes as srun would start them (SLURM_* set here).
fn slurm(world: u32, port: u16, suite: &Path, out: &Path, extra: &[(&str, &str)]) -> Vec<Child> {
    slurm_on("cpu", world, port, suite, out, extra)
}

/// [`slurm`] on a device (`cpu`, `wgpu`).
fn slurm_on(
    device: &str,
    world: u32,
    port: u16,
    suite: &Path,
    out: &Path,
    extra: &[(&str, &str)],
) -> Vec<Child> {
    (0..world)
        .map(|r| slurm_rank(device, r, world, port, suite, out, extra))
        .collect()
}

/// Rank `r` of [`slurm_on`], with `extra` variables of its own.
fn slurm_rank(
    device: &str,
    r: u32,
    world: u32,
    port: u16,
    suite: &Path,
    out: &Path,
    extra: &[(&str, &str)],
) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stallscope"));
    clean(&mut c)
        .args(["run", suite.to_str().unwrap(), "--device", device, "--out"])
        .arg(out)
        .envs([
            ("SLURM_PROCID", r.to_string()),
            ("SLURM_LOCALID", r.to_string()),
            ("SLURM_NTASKS", world.to_string()),
            ("SLURM_NODEID", "0".into()),
            ("SLURM_JOB_ID", "4242".into()),
            ("SLURM_JOB_NODELIST", "localhost,node[02-03]".into()),
            ("MASTER_PORT", port.to_string()),
        ])
        .envs(extra.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("spawn a rank")
}

fn merge(dir: &Path) -> Bundle {
    let o = run(&["merge", dir.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    valid_bundle(&dir.join("bundle.merged.json"))
}

/// Every rank's bundle validates, carries its layout, and took its share.
fn check_ranks(out: &Path, world: u32, launcher: &str) -> Vec<Bundle> {
    (0..world)
        .map(|r| {
            let b = valid_bundle(&out.join(format!("bundle.rank-{r}.json")));
            let l = b.environment.rank.clone().expect("a rank layout");
            assert_eq!(
                (l.rank, l.world_size, l.launcher.as_str()),
                (r, world, launcher)
            );
            assert_eq!(l.sync, "tcpstore_barrier");
            assert!(
                l.hostname.as_deref().is_some_and(|h| !h.is_empty()),
                "{l:?}"
            );
            assert_eq!(
                b.status.state,
                RunState::Complete,
                "rank {r}: {:?}",
                b.status
            );
            let loader = b.experiment("loader").unwrap();
            for c in &loader.configurations {
                assert!(c.failure.is_none(), "rank {r} {}: {:?}", c.id, c.failure);
                for run in &c.runs {
                    let samples = run
                        .whole_run
                        .as_ref()
                        .and_then(|w| w.samples)
                        .or_else(|| run.diagnostic.as_ref().and_then(|d| d.samples));
                    // 500 samples padded to a multiple of the world, shared.
                    assert_eq!(samples, Some(500u64.div_ceil(u64::from(world))));
                    if let Some(s) = &run.steps {
                        assert_eq!(s.comm_ns.len(), s.compute_ns.len(), "one comm per step");
                    }
                }
            }
            b
        })
        .collect()
}

/// A merged bundle (format 1.3): every configuration's ranks as columns,
/// and its runs the job's, one per run of one rank.
fn check_merged(m: &Bundle, world: u32, parts: &[Bundle]) {
    assert_eq!(m.ranks.len() as u32, world);
    assert_eq!(m.status.state, RunState::Complete);
    for (ei, e) in m.experiments.iter().enumerate() {
        for (ci, c) in e.configurations.iter().enumerate() {
            let cols = c
                .ranks
                .as_ref()
                .expect("a merged configuration has rank columns");
            assert_eq!(cols.world, world, "{}/{}", e.id, c.id);
            let one = parts[0].experiments[ei].configurations[ci].runs.len();
            assert_eq!(c.runs.len(), one, "{}/{}: one job run per run", e.id, c.id);
            assert!(c.runs.iter().all(|r| r.job.is_some()), "{}/{}", e.id, c.id);
        }
    }
}

/// The same suite as one process and as 2 ranks under torchrun: the merged
/// bundle's job samples/s is the sum-based figure (all ranks' samples over
/// the slowest rank's seconds), and `compare` prints the scaling efficiency
/// with its split.
#[test]
fn a_job_of_two_ranks_is_compared_with_one_process() {
    let _serial = serial();
    let dir = temp_dir("scaling");
    let suite = write_suite(dir.path(), "ranks.toml", SUITE);
    let single = dir.path().join("single");
    let mut c = Command::new(env!("CARGO_BIN_EXE_stallscope"));
    let o = clean(&mut c)
        .args(["run", suite.to_str().unwrap(), "--device", "cpu", "--out"])
        .arg(&single)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = dir.path().join("ranks");
    let o = torchrun(2, &suite, &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let parts = check_ranks(&out, 2, "torchrun");
    let m = merge(&out);
    for (ci, c) in m
        .experiment("loader")
        .unwrap()
        .configurations
        .iter()
        .enumerate()
    {
        for run in c.runs.iter().filter(|r| r.whole_run.is_some()) {
            let of = |b: &Bundle| {
                let cfg = &b.experiment("loader").unwrap().configurations[ci];
                let plain = run.id.strip_prefix("job-").expect("a job run's id");
                let r = cfg.runs.iter().find(|x| x.id.ends_with(plain)).unwrap();
                let w = r.whole_run.as_ref().unwrap();
                (w.samples.unwrap(), w.seconds.unwrap())
            };
            let (samples, slowest) = parts
                .iter()
                .map(of)
                .fold((0, 0.0f64), |(n, s), (m, t)| (n + m, s.max(t)));
            let job = run.whole_run.as_ref().unwrap().samples_per_s.unwrap();
            let want = samples as f64 / slowest;
            assert!(
                (job - want).abs() <= 1e-9 * want,
                "{}: {job} vs {want}",
                c.id
            );
        }
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_stallscope"));
    let o = clean(&mut c)
        .arg("compare")
        .arg(single.join("bundle.json"))
        .arg(out.join("bundle.merged.json"))
        .output()
        .unwrap();
    let printed = text(&o);
    assert!(o.status.code().is_some_and(|c| c <= 1), "{printed}");
    for want in [
        "SCALING from 1 to 2 rank(s)",
        "efficiency",
        "data",
        "comm",
        "rest",
    ] {
        assert!(printed.contains(want), "{want:?} missing:\n{printed}");
    }
    assert!(
        printed.lines().all(|l| l.chars().count() <= 100),
        "{printed}"
    );
}

#[test]
fn torchrun_with_two_and_four_ranks_writes_bundles_that_merge() {
    let _serial = serial();
    for world in [2u32, 4] {
        let dir = temp_dir(&format!("torchrun{world}"));
        let suite = write_suite(dir.path(), "ranks.toml", SUITE);
        let out = dir.path().join("out");
        let o = torchrun(world, &suite, &out);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let parts = check_ranks(&out, world, "torchrun");
        check_merged(&merge(&out), world, &parts);
        if world == 2 {
            site_checks_the_sidecars(&out, dir.path());
        }
    }
}

/// `stallscope site` copies a merged bundle's sidecars only after checking
/// each against the bundle (size, checksum, bundle, stage): a damaged one
/// is one message naming it, and no site is written.
fn site_checks_the_sidecars(out: &Path, dir: &Path) {
    let merged = out.join("bundle.merged.json");
    let site = |to: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_stallscope"));
        clean(&mut c)
            .arg("site")
            .arg(&merged)
            .arg("--out")
            .arg(dir.join(to))
            .output()
            .unwrap()
    };
    let o = site("site-ok");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let sidecar = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "ssrs"))
        .expect("a merged bundle of 2 ranks has sidecars");
    assert!(
        dir.join("site-ok/bundles")
            .join(sidecar.file_name().unwrap())
            .is_file()
    );
    let mut bytes = std::fs::read(&sidecar).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&sidecar, &bytes).unwrap();
    let o = site("site-bad");
    let printed = text(&o);
    assert_eq!(o.status.code(), Some(2), "{printed}");
    assert!(
        printed.contains(&sidecar.display().to_string()),
        "{printed}"
    );
    assert!(printed.contains("does not belong with it"), "{printed}");
    assert!(
        !dir.join("site-bad/index.json").exists(),
        "nothing is written"
    );
}

#[test]
fn slurm_variables_make_ranks_too() {
    let _serial = serial();
    let dir = temp_dir("slurm");
    let suite = write_suite(dir.path(), "ranks.toml", SUITE);
    let out = dir.path().join("out");
    for c in slurm(2, free_port(), &suite, &out, &[]) {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let parts = check_ranks(&out, 2, "slurm");
    let l = parts[1].environment.rank.as_ref().unwrap();
    assert_eq!(
        (l.master_addr.as_str(), l.job_id.as_deref()),
        ("localhost", Some("4242"))
    );
    check_merged(&merge(&out), 2, &parts);
}

/// The pytorch engine under torchrun: each rank's harness trains with real
/// DDP on the run's store, its diagnostic epochs time the all-reduce as
/// comm, and the native points of the same sweep meet at the barrier.
const DDP_SUITE: &str = r#"
title = "ranks, ddp"
seed = 7
repeats = 1
epochs = 2
torch_threads = 1
rank_timeout_s = 60

[[experiment]]
id = "ddp"
kind = "loader"
model = "linear"
features = 16
classes = 4

[experiment.loader]
source = "tensor"
samples = 400
batch_size = 25
workers = [0]
engines = ["native", "pytorch"]
"#;

#[test]
fn the_pytorch_engine_trains_ddp_across_ranks() {
    let _serial = serial();
    let dir = temp_dir("ddp");
    let suite = write_suite(dir.path(), "ddp.toml", DDP_SUITE);
    let out = dir.path().join("out");
    let o = torchrun(2, &suite, &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for r in 0..2 {
        let b = valid_bundle(&out.join(format!("bundle.rank-{r}.json")));
        let e = b.experiment("ddp").unwrap();
        assert_eq!(e.configurations.len(), 2, "native and pytorch");
        for c in &e.configurations {
            assert!(c.failure.is_none(), "rank {r} {}: {:?}", c.id, c.failure);
            let diag: Vec<_> = c.runs.iter().filter_map(|x| x.steps.as_ref()).collect();
            assert_eq!(diag.len(), 2, "rank {r} {}: two diagnostic epochs", c.id);
            for s in diag {
                // 400 samples over 2 ranks, batches of 25: 8 steps each.
                assert_eq!(s.compute_ns.len(), 8, "rank {r} {}", c.id);
                assert_eq!(s.comm_ns.len(), 8, "rank {r} {}: one comm per step", c.id);
                assert!(s.comm_ns.iter().all(|&n| n > 0), "rank {r} {}", c.id);
            }
        }
    }
    let m = merge(&out);
    assert_eq!(m.ranks.len(), 2);
}

/// On the pytorch engine, a configuration whose harness fails on one rank
/// only (as an out-of-memory error on one GPU would) is found by the other
/// rank within seconds, not at the process group's timeout: its harness
/// waits for the failed one in the collective and is stopped. The hook
/// fails rank 1's harness in every configuration; each is found.
#[test]
fn a_harness_failing_on_one_rank_is_found_within_seconds() {
    let _serial = serial();
    let dir = temp_dir("peer-out-of-step");
    let text_ = DDP_SUITE
        .replace("rank_timeout_s = 60", "rank_timeout_s = 120")
        .replace(
            r#"engines = ["native", "pytorch"]"#,
            r#"engines = ["pytorch"]"#,
        )
        .replace("workers = [0]", "workers = [0, 1]");
    let suite = write_suite(dir.path(), "ddp.toml", &text_);
    let out = dir.path().join("out");
    let started = Instant::now();
    let fault = [("STALLSCOPE_HARNESS_FAULT", "r1:exit@0:1")];
    for c in slurm(2, free_port(), &suite, &out, &fault) {
        let o = c.wait_with_output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "a failure is recorded: {}",
            text(&o)
        );
    }
    let took = started.elapsed();
    // Two configurations, each would wait out the 120 s timeout unfound.
    assert!(took < Duration::from_secs(90), "took {took:?}");
    let b0 = valid_bundle(&out.join("bundle.rank-0.json"));
    let b1 = valid_bundle(&out.join("bundle.rank-1.json"));
    let (e0, e1) = (b0.experiment("ddp").unwrap(), b1.experiment("ddp").unwrap());
    assert_eq!(e0.configurations.len(), 2);
    for (c0, c1) in e0.configurations.iter().zip(&e1.configurations) {
        let f1 = format!(
            "{:?}",
            c1.failure.as_ref().expect("rank 1's harness failed")
        );
        assert!(f1.contains("with exit status 3"), "{f1}");
        let Some(Failure::CommTimeout {
            missing_ranks,
            timeout_s,
            message,
            ..
        }) = &c0.failure
        else {
            panic!("rank 0 {}: {:?}", c0.id, c0.failure)
        };
        assert_eq!(missing_ranks, &[1], "{message}");
        assert_eq!(*timeout_s, None, "found, not timed out: {message}");
        assert!(
            message.contains("went out of step") && message.contains("rank 1"),
            "{message}"
        );
    }
    merge(&out);
}

/// The wgpu back end (lavapipe here) meets the other ranks every step too.
#[test]
fn wgpu_ranks_meet_at_the_barrier() {
    let _serial = serial();
    let dir = temp_dir("wgpu");
    let suite = write_suite(
        dir.path(),
        "wgpu.toml",
        &SUITE.replace("workers = [0, 2]", "workers = [0]"),
    );
    let out = dir.path().join("out");
    for c in slurm_on("wgpu", 2, free_port(), &suite, &out, &[]) {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    for r in 0..2 {
        let b = valid_bundle(&out.join(format!("bundle.rank-{r}.json")));
        let e = b.experiment("loader").unwrap();
        let series: Vec<_> = e
            .configurations
            .iter()
            .flat_map(|c| &c.runs)
            .filter_map(|x| x.steps.as_ref())
            .collect();
        assert!(!series.is_empty(), "rank {r}: diagnostic runs on wgpu");
        for s in series {
            assert_eq!(
                s.comm_ns.len(),
                s.compute_ns.len(),
                "rank {r}: comm per step"
            );
        }
    }
    merge(&out);
}

#[test]
fn a_slowed_rank_is_the_one_the_others_wait_for() {
    let _serial = serial();
    let dir = temp_dir("slow");
    let text_ = SUITE.replace(
        "rank_timeout_s = 20",
        "rank_timeout_s = 20\nslow_rank = 1\nslow_rank_delay_ms = 40",
    );
    let suite = write_suite(dir.path(), "ranks.toml", &text_);
    let out = dir.path().join("out");
    for c in slurm(2, free_port(), &suite, &out, &[]) {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let m = merge(&out);
    let e = m.experiment("batch_sweep").unwrap();
    let a = rank_analysis_in(&m, &e.configurations[0]).expect("a rank analysis");
    let share = |r: usize| a.ranks[r].comm_share.expect("a comm share");
    assert!(share(0) > 0.5, "rank 0 waits for rank 1: {a:?}");
    assert!(share(1) < 0.2, "rank 1 hardly waits: {a:?}");
    assert_eq!(a.stragglers.first().map(|s| s.0), Some(1), "{a:?}");
}

#[test]
fn a_killed_rank_ends_the_others_at_the_timeout_naming_it() {
    let _serial = serial();
    // Rank 1 killed: rank 0 waits out the timeout. Rank 0 (the store's
    // host) killed: rank 1's next store operation fails at once.
    for (victim, survivor) in [(1u32, 0u32), (0, 1)] {
        let dir = temp_dir("killed");
        let text_ = SUITE.replace("rank_timeout_s = 20", "rank_timeout_s = 5");
        let suite = write_suite(dir.path(), "ranks.toml", &text_);
        let out = dir.path().join("out");
        let started = Instant::now();
        // batch_sweep: 10 steps per epoch and rank; the 25th loop barrier is
        // in the first diagnostic epoch, after two whole-run epochs finished.
        let abort = format!("{victim}:25");
        let abort = [("STALLSCOPE_ABORT_RANK_AT", abort.as_str())];
        let mut outputs: Vec<Output> = slurm(2, free_port(), &suite, &out, &abort)
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let took = started.elapsed();
        let (o_survivor, o_victim) = if victim == 1 {
            let v = outputs.pop().unwrap();
            (outputs.pop().unwrap(), v)
        } else {
            (outputs.pop().unwrap(), outputs.pop().unwrap())
        };
        assert_eq!(
            o_victim.status.code(),
            None,
            "killed by a signal: {}",
            text(&o_victim)
        );
        assert_eq!(o_survivor.status.code(), Some(1), "{}", text(&o_survivor));
        assert!(took < Duration::from_secs(60), "took {took:?}");
        let b = valid_bundle(&out.join(format!("bundle.rank-{survivor}.json")));
        let failures: Vec<&Failure> = b
            .experiments
            .iter()
            .flat_map(|e| &e.configurations)
            .filter_map(|c| c.failure.as_ref())
            .collect();
        assert_eq!(
            failures.len(),
            3,
            "every configuration from the death on: {failures:?}"
        );
        for f in &failures {
            let Failure::CommTimeout {
                missing_ranks,
                timeout_s,
                ..
            } = f
            else {
                panic!("{f:?}")
            };
            assert_eq!(
                (missing_ranks.as_slice(), *timeout_s),
                (&[victim][..], Some(5.0))
            );
        }
        let Failure::CommTimeout {
            operation, message, ..
        } = failures[0]
        else {
            unreachable!()
        };
        // Barrier 0 is the start of the run; the loops' 25th is the store's 26th.
        assert_eq!(operation, "barrier 26 at step 5 of epoch 0", "{message}");
        // The victim's bundle, saved before it died, still validates; the
        // merge is partial and names it.
        valid_bundle(&out.join(format!("bundle.rank-{victim}.json")));
        let m = merge(&out);
        assert_eq!(m.status.state, RunState::Partial);
        let expected = format!("rank(s) {victim} did not complete");
        assert!(m.status.message.as_deref().unwrap().starts_with(&expected));
    }
}

/// A configuration that fails on one rank only (an injected panic in rank
/// 1's batch sweep, as an out-of-memory error on one GPU would be): rank 1
/// moves on to the loader while rank 0 still waits in the sweep. The ranks
/// find that they went out of step within a few barrier slices, not at the
/// 60 s timeout, and record it (which rank, where each was) instead of
/// pairing steps of different configurations; every later configuration
/// fails at once, and the bundles stay valid and merge.
#[test]
fn a_configuration_that_fails_on_one_rank_only_is_found_out() {
    let _serial = serial();
    let dir = temp_dir("outofstep");
    let text_ = SUITE.replace("rank_timeout_s = 20", "rank_timeout_s = 60");
    let suite = write_suite(dir.path(), "ranks.toml", &text_);
    let out = dir.path().join("out");
    let port = free_port();
    let started = Instant::now();
    let ranks = [
        slurm_rank("cpu", 0, 2, port, &suite, &out, &[]),
        slurm_rank(
            "cpu",
            1,
            2,
            port,
            &suite,
            &out,
            &[("STALLSCOPE_INJECT_PANIC", "bs50")],
        ),
    ];
    let outputs: Vec<Output> = ranks
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let bundles: Vec<Bundle> = (0..2)
        .map(|r| {
            assert_eq!(outputs[r].status.code(), Some(1), "{}", text(&outputs[r]));
            valid_bundle(&out.join(format!("bundle.rank-{r}.json")))
        })
        .collect();
    let failure = |b: &Bundle, e: &str, i: usize| -> Failure {
        let c = &b.experiment(e).unwrap().configurations[i];
        c.failure
            .clone()
            .unwrap_or_else(|| panic!("{e}/{}: no failure", c.id))
    };
    let Failure::Panic { message } = failure(&bundles[1], "batch_sweep", 0) else {
        panic!(
            "rank 1's sweep: {:?}",
            failure(&bundles[1], "batch_sweep", 0)
        )
    };
    assert!(message.contains("injected panic"), "{message}");
    for (r, b) in bundles.iter().enumerate() {
        let places = [("batch_sweep", 0), ("loader", 0), ("loader", 1)];
        for (e, i) in places.into_iter().skip(r) {
            let Failure::CommTimeout {
                timeout_s,
                missing_ranks,
                message,
                ..
            } = failure(b, e, i)
            else {
                panic!("rank {r} {e}/{i}: {:?}", failure(b, e, i))
            };
            assert_eq!(timeout_s, None, "rank {r} {e}/{i}: {message}");
            assert_eq!(
                missing_ranks,
                vec![1 - r as u32],
                "rank {r} {e}/{i}: {message}"
            );
            if (e, i) == places[r] {
                assert!(
                    message.contains("out of step")
                        && message.contains("batch_sweep/bs50 repeat 0")
                        && message.contains("loader/")
                        && message.ends_with("the configurations measured before are kept"),
                    "rank {r} {e}/{i}: whole, from the store too: {message}"
                );
            } else {
                assert!(
                    message.starts_with("not run:"),
                    "rank {r} {e}/{i}: {message}"
                );
            }
        }
    }
    let m = merge(&out);
    let sweep = &m.experiment("batch_sweep").unwrap().configurations[0];
    let merged = format!("{:?}", sweep.failure);
    assert!(
        merged.contains("rank 0: ") && merged.contains("out of step"),
        "{merged}"
    );
    // The report says what happened, not that something timed out.
    let merged_path = out.join("bundle.merged.json");
    let o = run(&["report", merged_path.to_str().unwrap()], &[]);
    let report = text(&o);
    assert!(
        report.contains("out of step in the barrier") && !report.contains("timed out"),
        "{report}"
    );
}

/// Ctrl-C (a real SIGINT from outside) on one rank only: that rank stops
/// after its step, and the others stop with it within a slice of their
/// barrier wait, not at the 60 s timeout. Every rank exits 130 with a valid
/// partial bundle, the others' interrupted configuration names the rank
/// that stopped, and the merge is partial. Rank 1, then rank 0 (which hosts
/// the store and must outlive the others' last use of it), and rank 1 on
/// the pytorch engine, whose harness the others' DDP collective loses.
#[test]
fn a_stop_on_one_rank_stops_them_all_at_once() {
    let _serial = serial();
    let native = SUITE
        .replace("rank_timeout_s = 20", "rank_timeout_s = 60")
        .replace("epochs = 2", "epochs = 40");
    let ddp = DDP_SUITE
        .replace("epochs = 2", "epochs = 30")
        .replace("samples = 400", "samples = 4000")
        .replace("workers = [0]", "workers = [0, 1]")
        .replace(
            r#"engines = ["native", "pytorch"]"#,
            r#"engines = ["pytorch"]"#,
        );
    for (victim, text_) in [(1u32, &native), (0, &native), (1, &ddp)] {
        let dir = temp_dir("stopped");
        let suite = write_suite(dir.path(), "ranks.toml", text_);
        let out = dir.path().join("out");
        let mut ranks = slurm(2, free_port(), &suite, &out, &[]);
        // Once the victim saved its first finished configuration.
        let saved = out.join(format!("bundle.rank-{victim}.json"));
        wait_for_a_saved_configuration(&saved, &mut ranks);
        let pid = ranks[victim as usize].id() as i32;
        // SAFETY: sending SIGINT to our own child process.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let stopped = Instant::now();
        let outputs: Vec<Output> = ranks
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let took = stopped.elapsed();
        assert!(
            took < Duration::from_secs(20),
            "victim {victim}: took {took:?}"
        );
        for (r, o) in outputs.iter().enumerate() {
            assert_eq!(o.status.code(), Some(130), "rank {r}: {}", text(o));
            let b = valid_bundle(&out.join(format!("bundle.rank-{r}.json")));
            assert_eq!(b.status.state, RunState::Partial, "rank {r}");
            let messages: Vec<&str> = b
                .experiments
                .iter()
                .flat_map(|e| &e.configurations)
                .filter_map(|c| match &c.failure {
                    Some(Failure::Interrupted { message }) => Some(message.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(messages.len(), 1, "rank {r}: {messages:?}");
            if r as u32 == victim {
                assert!(
                    messages[0].starts_with("Ctrl-C or SIGTERM during"),
                    "{messages:?}"
                );
            } else {
                let want = format!("Ctrl-C or SIGTERM on rank {victim} (the ranks stop together)");
                assert!(messages[0].starts_with(&want), "rank {r}: {messages:?}");
            }
        }
        let m = merge(&out);
        assert_eq!(m.status.state, RunState::Partial);
    }
}

#[test]
fn an_unreachable_master_is_one_clear_message_within_the_timeout() {
    let _serial = serial();
    let dir = temp_dir("unreachable");
    let text_ = SUITE.replace("rank_timeout_s = 20", "rank_timeout_s = 2");
    let suite = write_suite(dir.path(), "ranks.toml", &text_);
    let out = dir.path().join("out");
    let port = free_port();
    let started = Instant::now();
    // Rank 1 alone: nobody hosts the store.
    let mut c = Command::new(env!("CARGO_BIN_EXE_stallscope"));
    clean(&mut c)
        .args(["run", suite.to_str().unwrap(), "--device", "cpu", "--out"])
        .arg(&out)
        .envs([
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
        ])
        .env("MASTER_PORT", port.to_string());
    let o = c.output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let expected = format!("cannot reach the rank-0 store at 127.0.0.1:{port} within 2 s");
    assert!(err.contains(&expected), "{err}");
    assert!(err.contains("check that MASTER_ADDR"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{err}"
    );
}

/// Shares against the real DistributedSampler (its own drop_last off), in
/// a BatchSampler with the batch-level drop_last, for generated (n, world,
/// seed, epoch, shuffle, drop_last, batch size). With shuffle the epoch's
/// order is torch's randperm (seed + epoch) handed to `Shard::take`; the
/// runner's own order is its seeded shuffle, the same on every engine.
#[test]
fn shards_match_torchs_distributed_sampler() {
    let _serial = serial();
    let mut rng = stallscope_loader::Rng::new(3);
    let mut cases = Vec::new();
    for _ in 0..40 {
        let world = 1 + rng.below(7) as usize;
        let n = 1 + rng.below(60) as usize;
        cases.push(serde_json::json!({
            "n": n, "world": world, "seed": rng.below(1000), "epoch": rng.below(5),
            "shuffle": rng.coin(), "drop_last": rng.coin(), "bs": 1 + rng.below(9),
        }));
    }
    let script = r#"
import json, sys, torch
from torch.utils.data import BatchSampler, DistributedSampler
out = []
for c in json.load(sys.stdin):
    data = list(range(c["n"]))
    ranks = []
    for r in range(c["world"]):
        ds = DistributedSampler(data, num_replicas=c["world"], rank=r, shuffle=c["shuffle"],
                                seed=c["seed"], drop_last=False)
        ds.set_epoch(c["epoch"])
        ranks.append([list(b) for b in BatchSampler(ds, c["bs"], c["drop_last"])])
    g = torch.Generator(); g.manual_seed(c["seed"] + c["epoch"])
    out.append({"ranks": ranks, "perm": torch.randperm(c["n"], generator=g).tolist()})
print(json.dumps(out))
"#;
    let mut child = Command::new(venv_bin().join("python"))
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the peers' python");
    serde_json::to_writer(child.stdin.take().unwrap(), &cases).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let torch: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    for (c, t) in cases.iter().zip(&torch) {
        let get = |k: &str| c[k].as_u64().unwrap() as usize;
        let (n, world, bs) = (get("n"), get("world"), get("bs"));
        let drop_last = c["drop_last"].as_bool().unwrap();
        let perm: Vec<u64> = serde_json::from_value(t["perm"].clone()).unwrap();
        for rank in 0..world {
            let shard = Shard { rank, world };
            let ours: Vec<Vec<u64>> = if c["shuffle"].as_bool().unwrap() {
                shard
                    .take(perm.clone())
                    .chunks(bs)
                    .filter(|b| !drop_last || b.len() == bs)
                    .map(<[u64]>::to_vec)
                    .collect()
            } else {
                let epoch = get("epoch") as u32;
                shard_batches(Sampler::Sequential, n, bs, drop_last, epoch, shard)
            };
            let theirs: Vec<Vec<u64>> = serde_json::from_value(t["ranks"][rank].clone()).unwrap();
            assert_eq!(ours, theirs, "{c} rank {rank}");
        }
    }
}

/// Rank bundles made from a measured fixture, as rank `r` of `world`.
fn fixture_rank(r: u32, world: u32) -> Bundle {
    let bytes = include_bytes!("../../fixtures/measured/wgpu-quick.json");
    let mut b = stallscope_bundle::parse_bundle(bytes).unwrap();
    b.id = format!("fixture-r{r}");
    b.environment.rank = Some(stallscope_bundle::RankLayout {
        launcher: "slurm".into(),
        rank: r,
        world_size: world,
        local_rank: r % 8,
        master_addr: "node01".into(),
        master_port: 29500,
        sync: "tcpstore_barrier".into(),
        ..Default::default()
    });
    b
}

#[test]
fn merge_combines_1024_ranks() {
    let _serial = serial();
    let dir = temp_dir("merge1024");
    let world = 1024;
    for r in 0..world {
        let p = dir.path().join(format!("bundle.rank-{r}.json"));
        std::fs::write(p, fixture_rank(r, world).to_json_pretty()).unwrap();
    }
    let m = merge(dir.path());
    assert_eq!(m.ranks.len(), 1024);
    let ranks: Vec<u32> = m.ranks.iter().map(|h| h.rank).collect();
    assert_eq!(ranks, (0..world).collect::<Vec<_>>());
}

#[test]
fn merge_refuses_a_duplicate_rank_naming_both_files() {
    let _serial = serial();
    let dir = temp_dir("merge-dup");
    for (file, r) in [
        ("a.rank-0.json", 0),
        ("b.rank-0.json", 0),
        ("bundle.rank-1.json", 1),
    ] {
        let mut b = fixture_rank(r, 2);
        b.id = file.trim_end_matches(".json").into();
        std::fs::write(dir.path().join(file), b.to_json_pretty()).unwrap();
    }
    let o = run(&["merge", dir.path().to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("are both rank 0; expected one bundle per rank"),
        "{err}"
    );
    assert!(
        err.contains("a.rank-0.json") && err.contains("b.rank-0.json"),
        "{err}"
    );
    let o = run(&["merge", "/nonexistent-stallscope-dir"], &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent-stallscope-dir"));
}
