//! CPU cost, worker memory and timelines (issue 12) with real parts: the
//! native loader's real worker threads and processes over a CPU-bound
//! synthetic source, the real training loop (real libtorch on the CPU), and
//! the real `stallscope run`. The work a sample costs is measured first as
//! this thread's CPU time (getrusage), so "the work done" is known; each
//! epoch's measured CPU-seconds must agree with it within
//! [`LOW`]..[`HIGH`] × work + [`SLACK_S`].

// Shared with the runner's end-to-end tests; not every helper is used here.
#[allow(dead_code)]
mod util;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};

use stallscope_bundle::{CpuCost, CpuPartKind, Run, TimingMode};
use stallscope_core::{
    EpochSlot, LoopError,
    cost::{ENDED_PART, GpuTarget, Sampler, SamplerSpec},
};
use stallscope_loader::{LoaderConfig, SourceSpec, WorkerKind};
use stallscope_torch::{CopyMode, DeviceCtx, Feed, NativeFeed, Pinning, TorchSteps, Trainer};
use util::*;

/// Measured CPU may be this much below the work (clock-tick rounding of
/// `/proc` stat, a calibration on a busier moment)...
const LOW: f64 = 0.8;
/// ...or this much above it (a shared 2-core machine slows ALU work that
/// runs two at a time; the loader's own bookkeeping)...
const HIGH: f64 = 1.3;
/// ...plus this fixed allowance: starting workers (a worker process is a
/// fresh program), the sampler, handing batches over.
const SLACK_S: f64 = 0.15;

const SAMPLES: usize = 256;
const BATCH: usize = 16;

/// These tests measure CPU time of this process: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn spec(rounds: u64) -> SourceSpec {
    SourceSpec::Synthetic {
        samples: SAMPLES,
        features: 16,
        classes: 4,
        latency_us: 0,
        cpu_work_rounds: rounds,
    }
}

/// Thread CPU-seconds one sample of `spec(rounds)` costs, here and now.
fn per_sample_cpu_s(rounds: u64) -> f64 {
    let source = stallscope_loader::open_source(&spec(rounds)).unwrap();
    let mut out = vec![0.0f32; 16];
    let mut times = Default::default();
    let mut rng = stallscope_loader::Rng::new(0);
    let n = 48;
    let t0 = stallscope_loader::thread_usage();
    for i in 0..n {
        source.load(i, &mut rng, &mut out, &mut times).unwrap();
    }
    let t1 = stallscope_loader::thread_usage();
    (t1.user_s + t1.system_s - t0.user_s - t0.system_s) / n as f64
}

/// Rounds that cost about 3 ms of CPU per sample (about 0.8 s per epoch).
fn rounds_for_3ms() -> u64 {
    let probe = 200_000;
    let per = per_sample_cpu_s(probe).max(1e-6);
    ((probe as f64 * 0.003 / per) as u64).max(1000)
}

fn feed(rounds: u64, workers: usize, kind: WorkerKind, persistent: bool) -> NativeFeed {
    let config = LoaderConfig {
        batch_size: BATCH,
        workers,
        kind,
        persistent,
        ..LoaderConfig::default()
    };
    NativeFeed::new(config, spec(rounds), Pinning::Off).unwrap()
}

/// One epoch of the loader alone through the one loop.
fn loader_only_epoch(
    f: &mut dyn Feed,
    slot: EpochSlot,
    stop: &AtomicBool,
) -> Result<Run, LoopError> {
    let ctx = DeviceCtx::cpu();
    let mut steps = TorchSteps {
        trainer: None,
        feed: f,
        ctx: &ctx,
        copy: CopyMode::default(),
    };
    stallscope_core::run_epoch(&mut steps, &slot, stop)
}

/// One training epoch through the one loop.
fn run_epoch(
    t: &mut Trainer,
    f: &mut dyn Feed,
    ctx: &DeviceCtx,
    copy: CopyMode,
    slot: EpochSlot,
    stop: &AtomicBool,
) -> Result<Run, LoopError> {
    let mut steps = TorchSteps {
        trainer: Some(t),
        feed: f,
        ctx,
        copy,
    };
    stallscope_core::run_epoch(&mut steps, &slot, stop)
}

fn slot(mode: TimingMode, epoch: u32) -> EpochSlot {
    EpochSlot {
        mode,
        repeat: 0,
        epoch,
    }
}

/// The samples' work in CPU-seconds, calibrated before and after the
/// epoch: on a shared machine one calibration can land on a busier moment
/// than the epoch (58% apart once in CI), so a figure agrees with the work
/// when it agrees with either.
#[derive(Clone, Copy)]
struct Work([f64; 2]);

impl Work {
    fn before(rounds: u64) -> f64 {
        per_sample_cpu_s(rounds) * SAMPLES as f64
    }

    fn after(before: f64, rounds: u64) -> Self {
        Work([before, Self::before(rounds)])
    }

    fn max(self) -> f64 {
        self.0[0].max(self.0[1])
    }

    fn min(self) -> f64 {
        self.0[0].min(self.0[1])
    }
}

fn within(what: &str, measured: f64, work: Work) {
    let fits = |w: f64| measured >= LOW * w && measured <= HIGH * w + SLACK_S;
    let [w0, w1] = work.0;
    eprintln!("{what}: {measured:.3} CPU-s measured, {w0:.3} / {w1:.3} CPU-s of work");
    assert!(
        fits(w0) || fits(w1),
        "{what}: measured {measured:.3} CPU-s for {w0:.3} (before) / {w1:.3} (after) CPU-s \
         of work (expected {:.3}..{:.3} of either)",
        LOW * w0.min(w1),
        HIGH * w0.max(w1) + SLACK_S
    );
}

fn cost(run: &Run) -> &CpuCost {
    run.cost.as_ref().expect("every epoch records its CPU cost")
}

/// The cost's parts: the runner first, then one per worker; thread workers
/// inside the runner's figure, process workers added to it with their memory.
fn check_parts(what: &str, (workers, kind): (usize, WorkerKind), run: &Run, work: Work) {
    let c = cost(run);
    let runner = &c.parts[0];
    assert_eq!(
        (runner.name.as_str(), runner.kind),
        ("runner", CpuPartKind::Process)
    );
    let workers_parts: Vec<_> = c.parts[1..].iter().collect();
    assert_eq!(workers_parts.len(), workers, "{what}: {:?}", c.parts);
    let part_sum: f64 = workers_parts.iter().map(|p| p.user_s + p.system_s).sum();
    let runner_s = runner.user_s + runner.system_s;
    let memory = run.memory.as_ref();
    match (workers, kind) {
        (0, _) => {
            within(what, runner_s, work);
            assert!(memory.is_none_or(|m| m.workers_peak_rss_bytes.is_none()));
        }
        (_, WorkerKind::Threads) => {
            within(&format!("{what}, thread parts"), part_sum, work);
            assert!(workers_parts.iter().all(|p| p.kind == CpuPartKind::Thread));
            // Inside the runner's figure, not added (ticks vs getrusage: 10 ms each).
            assert!(runner_s + 0.02 * workers as f64 >= part_sum, "{what}");
            assert!(
                (c.cpu_s - runner_s).abs() < 1e-9,
                "{what}: threads are not added"
            );
            assert!(memory.is_none_or(|m| m.workers_peak_rss_bytes.is_none()));
        }
        (_, WorkerKind::Processes) => {
            within(&format!("{what}, process parts"), part_sum, work);
            assert!(
                (c.cpu_s - runner_s - part_sum).abs() < 1e-9,
                "{what}: processes add"
            );
            assert!(
                runner_s < 0.5 * work.max(),
                "{what}: the runner only hands over"
            );
            let peaks: Vec<u64> = workers_parts
                .iter()
                .map(|p| p.peak_rss_bytes.unwrap())
                .collect();
            assert!(peaks.iter().all(|&p| p > 1 << 18), "{what}: {peaks:?}");
            let m = memory.expect("worker memory recorded");
            assert_eq!(m.workers_peak_rss_bytes, Some(peaks.iter().sum()));
        }
    }
}

/// The whole-run timeline: aligned series that end at the last batch, the
/// reason there is no GPU series, and sampled cores that agree with the cost.
fn check_timeline(what: &str, run: &Run) {
    let c = cost(run);
    let tl = run
        .timeline
        .as_ref()
        .expect("whole-run epochs get a timeline");
    let n = tl.t_ms.len();
    assert!(n >= 2, "{what}: {n} samples in {:.2} s", c.wall_s);
    assert_eq!(
        (
            tl.steps.len(),
            tl.host_cpu_cores.len(),
            tl.host_rss_bytes.len()
        ),
        (n, n, n)
    );
    assert_eq!(
        *tl.steps.last().unwrap(),
        (SAMPLES / BATCH) as u64,
        "{what}"
    );
    assert!(tl.gpu.is_none());
    assert!(
        tl.gpu_not_available
            .as_deref()
            .unwrap()
            .contains("no model")
    );
    // The busy cores the sampler saw average to the cost's figure.
    let mean_cores = c.cpu_s / c.wall_s;
    let sampled: f64 = tl.host_cpu_cores.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    assert!(
        (sampled - mean_cores).abs() <= 0.35 * mean_cores + 0.2,
        "{what}: sampled {sampled:.2} cores, cost says {mean_cores:.2}"
    );
    assert!(
        tl.sampler_cpu_s.unwrap() < 0.05 * c.wall_s,
        "{what}: the sampler is cheap"
    );
}

/// For in-loop, thread workers and process workers: the epoch's CPU-seconds
/// agree with the work the samples cost; threads are parts of the runner's
/// figure and processes are added; per 1,000 samples is cpu_s ÷ samples ×
/// 1,000; worker processes' memory is counted.
#[test]
fn cpu_seconds_agree_with_the_work_done_for_every_loader() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stop = AtomicBool::new(false);
    let rounds = rounds_for_3ms();
    for (workers, kind) in [
        (0, WorkerKind::Threads),
        (2, WorkerKind::Threads),
        (2, WorkerKind::Processes),
    ] {
        let what = format!("{workers} {kind:?}");
        let before = Work::before(rounds);
        let mut f = feed(rounds, workers, kind, false);
        let run = loader_only_epoch(&mut f, slot(TimingMode::WholeRun, 0), &stop).unwrap();
        let work = Work::after(before, rounds);
        let c = cost(&run);
        within(&what, c.cpu_s, work);
        let per = c.cpu_s_per_1000_samples.unwrap();
        assert!(
            (per - c.cpu_s / SAMPLES as f64 * 1000.0).abs() < 1e-12,
            "{what}"
        );
        assert!(c.wall_s > 0.0 && c.wall_s >= run.whole_run.as_ref().unwrap().seconds.unwrap());
        check_parts(&what, (workers, kind), &run, work);
        check_timeline(&what, &run);
    }
}

/// Persistent workers live across epochs: each epoch counts only its own
/// work (not what the workers used before), and they stay readable.
#[test]
fn persistent_workers_are_counted_per_epoch_not_cumulatively() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stop = AtomicBool::new(false);
    let rounds = rounds_for_3ms();
    for kind in [WorkerKind::Threads, WorkerKind::Processes] {
        let mut f = feed(rounds, 2, kind, true);
        for epoch in 0..2 {
            let before = Work::before(rounds);
            // Diagnostic epochs get the cost but no timeline.
            let run =
                loader_only_epoch(&mut f, slot(TimingMode::Diagnostic, epoch), &stop).unwrap();
            let work = Work::after(before, rounds);
            assert!(run.timeline.is_none());
            let c = cost(&run);
            let parts: f64 = c.parts[1..].iter().map(|p| p.user_s + p.system_s).sum();
            within(&format!("{kind:?} epoch {epoch}"), parts, work);
            within(&format!("{kind:?} epoch {epoch}, all"), c.cpu_s, work);
        }
    }
}

/// The libtorch loop on the CPU: the timeline says why there is no GPU
/// series ("the device is the CPU") and keeps the host series; the cost
/// holds at least the loader's work.
#[test]
fn a_training_epoch_on_the_cpu_records_cost_and_why_there_is_no_gpu_timeline() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use stallscope_core::ModelSpec;
    let stop = AtomicBool::new(false);
    let rounds = rounds_for_3ms() / 2;
    let ctx = DeviceCtx::cpu();
    let spec_m = ModelSpec::Linear {
        features: 16,
        classes: 4,
    };
    let mut t = Trainer::new(spec_m, spec_m.default_optimizer(), ctx.device, 0).unwrap();
    let mut f = feed(rounds, 2, WorkerKind::Processes, false);
    let before = Work::before(rounds);
    let s = slot(TimingMode::WholeRun, 0);
    let run = run_epoch(&mut t, &mut f, &ctx, CopyMode::default(), s, &stop).unwrap();
    let work = Work::after(before, rounds).min();
    let c = cost(&run);
    assert!(c.cpu_s >= LOW * work, "{} vs {work}", c.cpu_s);
    let tl = run.timeline.as_ref().unwrap();
    assert_eq!(
        tl.gpu_not_available.as_deref(),
        Some("the device is the CPU")
    );
    assert!(tl.gpu.is_none() && !tl.t_ms.is_empty());
    let m = run.memory.as_ref().unwrap();
    assert!(m.host_peak_rss_bytes.is_some() && m.workers_peak_rss_bytes.unwrap() > 0);
}

/// A CUDA target where there is no driver (this machine): NVML fails
/// cleanly, the reason is recorded, and the host series are all there.
#[test]
fn without_nvml_the_timeline_says_why_and_loses_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let steps = std::sync::Arc::new(AtomicU64::new(0));
    let s = Sampler::start(SamplerSpec {
        interval: std::time::Duration::from_millis(5),
        workers: None,
        steps: Some(steps.clone()),
        tree: None,
        gpu: GpuTarget::Cuda(0),
        allocator_only: false,
    })
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(40));
    steps.store(3, std::sync::atomic::Ordering::Relaxed);
    let tl = s.finish();
    let n = tl.t_ms.len();
    assert!(n >= 1 && tl.host_cpu_cores.len() == n && tl.host_rss_bytes.len() == n);
    assert_eq!(tl.steps.last(), Some(&3));
    match stallscope_core::cost::nvml() {
        Err(why) => {
            assert_eq!(tl.gpu_not_available.as_deref(), Some(why.as_str()));
            assert!(why.contains("libnvidia-ml.so.1"), "{why}");
        }
        // A machine with a driver: whatever GPU series exist are aligned.
        Ok(_) => {
            if let Some(g) = &tl.gpu {
                for len in [g.utilization_percent.len(), g.memory_used_bytes.len()] {
                    assert!(len == 0 || len == n);
                }
            }
        }
    }
}

const COST_SUITE: &str = r#"
title = "cost, tiny"
seed = 7
repeats = 1
epochs = 1

[[experiment]]
id = "cost"
kind = "loader"
model = "linear"
features = 16
classes = 4

[experiment.loader]
source = "synthetic"
latency_ms = 0
cpu_work_rounds = 2000
samples = 256
batch_size = 32
workers = [0, 2]
worker_kinds = ["threads", "processes"]
pinned = [false]

[[experiment]]
id = "cost_none"
kind = "loader"
model = "none"
features = 16
classes = 4

[experiment.loader]
source = "synthetic"
latency_ms = 0
cpu_work_rounds = 2000
samples = 256
batch_size = 32
workers = [0, 2]
worker_kinds = ["threads", "processes"]
pinned = [false]
"#;

/// Through `stallscope run`: every run of every configuration carries its
/// cost, whole-run runs their timeline, process workers their memory (the
/// loader alone, `model = "none"`, too), and the bundle validates.
#[test]
fn the_bundle_carries_cost_timelines_and_worker_memory() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("cost");
    let suite = write_suite(dir.path(), "cost.toml", COST_SUITE);
    let out = dir.path().join("out");
    let o = run_on_cpu(&suite, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let bundle = valid_bundle(&out.join("bundle.json"));
    for (id, no_gpu) in [
        ("cost", "the device is the CPU"),
        ("cost_none", "the loop runs no model (model = \"none\")"),
    ] {
        let e = bundle.experiment(id).unwrap();
        assert_eq!(e.configurations.len(), 3, "{id}");
        for c in &e.configurations {
            let processes = c.id.contains("processes");
            for r in &c.runs {
                let cost = r
                    .cost
                    .as_ref()
                    .unwrap_or_else(|| panic!("{id} {} {}: no cost", c.id, r.id));
                assert!(cost.cpu_s > 0.0 && cost.cpu_s_per_1000_samples.unwrap() > 0.0);
                let whole = r.timing_mode == TimingMode::WholeRun;
                assert_eq!(r.timeline.is_some(), whole, "{id} {} {}", c.id, r.id);
                if let Some(tl) = &r.timeline {
                    assert_eq!(tl.gpu_not_available.as_deref(), Some(no_gpu), "{id}");
                }
                let peak = r.memory.as_ref().and_then(|m| m.workers_peak_rss_bytes);
                assert_eq!(peak.is_some(), processes, "{id} {} {}", c.id, r.id);
            }
        }
    }
}

const PEER_SUITE: &str = r#"
title = "cost, peers"
seed = 7
torch_threads = 1
repeats = 1
epochs = 2

[[experiment]]
id = "peers"
kind = "loader"
model = "linear"
features = 16
classes = 4

[experiment.loader]
source = "tensor"
samples = 4096
batch_size = 64
workers = [0, 2]
persistent = [true]
engines = ["pytorch"]
"#;

/// The Python harness (real PyTorch DataLoader): each epoch's cost is the
/// harness and its worker processes, found under it in `/proc`; live
/// (persistent) workers' peak memory is their sum. The harness shuts its
/// persistent workers down right after a mode's last epoch line, so the
/// runner's snapshot at that line finds each worker alive (a part of its
/// own) or already ended (its CPU in the part `ENDED_PART`, never the
/// harness's): both orders hold, and the workers' CPU is never lost.
/// `STALLSCOPE_PEERS=0` skips.
#[test]
fn a_peer_harness_and_its_workers_are_counted() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if std::env::var("STALLSCOPE_PEERS").as_deref() == Ok("0") {
        eprintln!("SKIPPED: STALLSCOPE_PEERS=0; the peer harness's cost was not tested");
        return;
    }
    let dir = temp_dir("cost-peers");
    let suite = write_suite(dir.path(), "peers.toml", PEER_SUITE);
    let out = dir.path().join("out");
    let harness = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../python");
    let harness = harness.to_str().unwrap();
    let o = run_on_cpu(&suite, &out, &[("STALLSCOPE_HARNESS_DIR", harness)]);
    assert!(o.status.success(), "{}", text(&o));
    let bundle = valid_bundle(&out.join("bundle.json"));
    let e = bundle.experiment("peers").unwrap();
    for c in &e.configurations {
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        let workers = !c.id.contains("w0");
        let mut workers_cpu = 0.0;
        let all: f64 = c
            .runs
            .iter()
            .filter_map(|r| r.cost.as_ref())
            .map(|k| k.cpu_s)
            .sum();
        assert!(all > 0.0, "{}: no CPU time in any epoch", c.id);
        for r in &c.runs {
            let cost = r
                .cost
                .as_ref()
                .unwrap_or_else(|| panic!("{} {}: no cost", c.id, r.id));
            assert_eq!(cost.parts[0].name, "harness");
            // `/proc` counts in clock ticks: a short epoch may read 0.
            assert!(
                cost.cpu_s >= 0.0 && cost.wall_s > 0.0,
                "{} {}: {cost:?}",
                c.id,
                r.id
            );
            let per = cost.cpu_s_per_1000_samples.unwrap();
            assert!((per - cost.cpu_s / 4096.0 * 1000.0).abs() < 1e-9);
            let sum: f64 = cost.parts.iter().map(|p| p.user_s + p.system_s).sum();
            assert!((sum - cost.cpu_s).abs() < 1e-9);
            if workers {
                workers_cpu += both_workers_counted(&c.id, r, cost);
                let peak = r.memory.as_ref().unwrap().workers_peak_rss_bytes.unwrap();
                assert!(peak > 1 << 20, "{} {}: {peak}", c.id, r.id);
            } else {
                let ended = cost.parts.iter().any(|p| p.name == ENDED_PART);
                assert!(
                    cost.parts.len() == 1 && !ended,
                    "{} {}: {cost:?}",
                    c.id,
                    r.id
                );
            }
            peer_timeline(&c.id, r, cost);
        }
        eprintln!(
            "{}: the workers' CPU over its epochs {workers_cpu:.3} s",
            c.id
        );
    }
}

/// An epoch of a harness with two persistent workers: each is a part of its
/// own (seen alive at the epoch's line) or ended in the window (the part
/// `ENDED_PART`, present whenever one was seen before and is gone now);
/// the workers' CPU in the epoch, the parts other than the harness's.
fn both_workers_counted(config: &str, r: &Run, cost: &CpuCost) -> f64 {
    let alive = cost
        .parts
        .iter()
        .filter(|p| p.name.starts_with("child process (pid "))
        .count();
    let ended = cost.parts.iter().any(|p| p.name == ENDED_PART);
    assert!(
        alive >= 2 || ended,
        "{config} {}: {alive} workers alive and none ended: {:?}",
        r.id,
        cost.parts
    );
    // Two workers collating 64 batches use a few clock ticks per epoch
    // (0.05 s or more here): none at all would be their CPU lost.
    let used: f64 = cost.parts[1..].iter().map(|p| p.user_s + p.system_s).sum();
    assert!(
        used > 0.0,
        "{config} {}: the workers' CPU is lost: {:?}",
        r.id,
        cost.parts
    );
    used
}

/// A peer run's timeline: whole-run epochs only, sampled over the same
/// window as the cost (the line before the epoch's to its own), without
/// steps (the harness reports none); the CPU it integrates to is the
/// harness tree's cost plus the runner's own small share.
fn peer_timeline(config: &str, r: &Run, cost: &CpuCost) {
    if r.timing_mode != TimingMode::WholeRun {
        assert!(
            r.timeline.is_none(),
            "{config} {}: a diagnostic timeline",
            r.id
        );
        return;
    }
    let t = r
        .timeline
        .as_ref()
        .unwrap_or_else(|| panic!("{config} {}: no timeline", r.id));
    let n = t.t_ms.len();
    assert!(n > 0 && t.steps.is_empty(), "{config} {}: {t:?}", r.id);
    assert_eq!((t.host_cpu_cores.len(), t.host_rss_bytes.len()), (n, n));
    assert!(t.host_rss_bytes.iter().all(|&b| b > 1 << 20), "{t:?}");
    assert_eq!(
        t.gpu_not_available.as_deref(),
        Some("the device is the CPU")
    );
    let mut before = 0u32;
    let cpu_s: f64 = t
        .t_ms
        .iter()
        .zip(&t.host_cpu_cores)
        .map(|(&ms, &cores)| {
            let dt = f64::from(ms - before) / 1e3;
            before = ms;
            f64::from(cores) * dt
        })
        .sum();
    eprintln!(
        "{config} {}: timeline {cpu_s:.3} CPU-s, cost {:.3} CPU-s",
        r.id, cost.cpu_s
    );
    assert!(
        (cpu_s - cost.cpu_s).abs() <= 0.25 * cost.cpu_s + 0.1,
        "{config} {}: the timeline integrates to {cpu_s:.3} CPU-s, the cost is {:.3}",
        r.id,
        cost.cpu_s
    );
}

/// `--device wgpu` (software Vulkan here): the wgpu back end's epochs carry
/// their cost and, whole-run, a timeline that says why there is no GPU
/// series; its process workers' memory is counted.
#[test]
fn wgpu_epochs_carry_cost_and_timelines() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("cost-wgpu");
    let suite = write_suite(dir.path(), "cost.toml", COST_SUITE);
    let out = dir.path().join("out");
    let o = run(
        &[
            "run",
            suite.to_str().unwrap(),
            "--device",
            "wgpu",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let bundle = valid_bundle(&out.join("bundle.json"));
    let e = bundle.experiment("cost").unwrap();
    assert!(!e.configurations.is_empty());
    for c in &e.configurations {
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        for r in &c.runs {
            let cost = r
                .cost
                .as_ref()
                .unwrap_or_else(|| panic!("{} {}: no cost", c.id, r.id));
            assert!(cost.cpu_s > 0.0, "{} {}", c.id, r.id);
            let whole = r.timing_mode == TimingMode::WholeRun;
            assert_eq!(r.timeline.is_some(), whole, "{} {}", c.id, r.id);
            if let Some(tl) = &r.timeline {
                assert!(tl.gpu_not_available.as_deref().unwrap().contains("wgpu"));
                assert_eq!(tl.steps.len(), tl.t_ms.len());
            }
            let peak = r.memory.as_ref().and_then(|m| m.workers_peak_rss_bytes);
            assert_eq!(
                peak.is_some(),
                c.id.contains("processes"),
                "{} {}",
                c.id,
                r.id
            );
        }
    }
}
