//! `stallscope job [OPTIONS] -- COMMAND [ARGS...]`: the user's own training
//! command, unmodified, measured in both timing modes (docs/your-job.md).
//! Each configuration (the script's own DataLoader settings, and each point
//! of `--sweep`) is a unit of the one driver: repeats in ascending,
//! descending, ascending order, Ctrl-C, the bundle saved after every unit;
//! each mode of a unit is a fresh process tree (`unit.rs`). The Python side
//! is `python/stallscope_job` (`docs/job-protocol.md`).

mod grid;
mod records;
mod unit;

use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use stallscope_bundle::{
    Bundle, Experiment, ExperimentKind, ParamValue, Provenance, RunState, RunStatus, SchemaVersion,
};
use stallscope_core::driver::{self, NoProgress, Outcome, UnitCtx};
use stallscope_core::engine::{bundle_id, final_status};

use super::run::{STOP, exit_code, install_ctrlc, print_report};
use crate::cli::JobArgs;
use unit::{JobExperiment, JobPlan};

pub fn run(args: &JobArgs) -> anyhow::Result<ExitCode> {
    install_ctrlc()?;
    let points = grid::points(&args.sweep)?;
    let (created_at, id) = bundle_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("out").join(&id));
    let path = out_dir.join("bundle.json");
    let python_dir = stallscope_peers::harness::dir().map_err(anyhow::Error::msg)?;
    let work = out_dir.join("units");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let plan = JobPlan {
        command: args.command.clone(),
        warmup: args.warmup,
        steps: args.steps,
        loader: args.loader,
        timeout: Duration::from_secs_f64(args.timeout),
        work,
        python_dir,
    };
    let experiment = skeleton(args, &points);
    let mut job = JobExperiment {
        overrides: points.iter().map(|p| p.overrides.clone()).collect(),
        seen: Mutex::new(vec![None; points.len()]),
        accelerator: Mutex::new(None),
        experiment: experiment.clone(),
        plan,
    };
    let mut bundle = new_bundle(args, id, created_at, experiment);
    let mut save = |b: &Bundle| {
        if let Err(e) = stallscope_core::bundle_file::write_atomic(&path, b) {
            eprintln!("stallscope job: writing {}: {e}", path.display());
        }
    };
    save(&bundle);
    let cx = UnitCtx {
        stop: &STOP,
        progress: &NoProgress,
        inject_panic: None,
    };
    let outcome = driver::drive(&mut bundle, 0, &mut job, args.repeats, &cx, &mut save);
    record_what_ran(&mut bundle.experiments[0], &job);
    bundle.environment.device = Some(device(&job));
    let (interrupted, failures) = match outcome {
        Outcome::Finished { failures } => (false, failures),
        Outcome::Interrupted => (true, 0),
    };
    bundle.status = final_status(interrupted, failures);
    save(&bundle);
    print_report(&bundle, &path, args.output.style());
    Ok(exit_code(interrupted, failures))
}

/// The experiment: one configuration per point, the script's own first.
fn skeleton(args: &JobArgs, points: &[grid::Point]) -> Experiment {
    let mut e = Experiment::new("job", ExperimentKind::Loader, "Your training job");
    e.description = Some(format!(
        "The command's own training loop, unmodified: its DataLoader (iteration index {}) \
         measured over {} steps after {} warm-up steps, in a fresh process per timing mode and \
         repeat. Whole-run: no synchronisation inside the window; diagnostic: the device \
         synchronised around next() and around the batch's host-to-device copies.",
        args.loader, args.steps, args.warmup
    ));
    e.swept = grid::swept(&args.sweep);
    e.baseline = points.first().map(|p| p.id.clone());
    e.configurations = points.iter().map(grid::Point::configuration).collect();
    let command = if args.redact_args {
        args.command.first().cloned().unwrap_or_default() + " (arguments left out)"
    } else {
        args.command.join(" ")
    };
    for (k, v) in [
        ("command", ParamValue::from(command)),
        ("steps", ParamValue::from(args.steps)),
        ("warmup", ParamValue::from(args.warmup)),
        ("loader", ParamValue::from(args.loader)),
    ] {
        e.settings.insert(k.into(), v);
    }
    e
}

/// The device the job trained on, as its processes said (`done`'s
/// `accelerator`), else the CPU.
fn device(job: &JobExperiment) -> stallscope_bundle::DeviceInfo {
    use stallscope_bundle::{DeviceInfo, DeviceKind};
    let accelerator = job.accelerator.lock().unwrap_or_else(|x| x.into_inner());
    match accelerator.as_deref() {
        Some(name) => DeviceInfo::new(DeviceKind::Cuda, name),
        None => DeviceInfo::new(
            DeviceKind::Cpu,
            stallscope_core::envinfo::cpu_model().unwrap_or_else(|| "CPU".into()),
        ),
    }
}

fn new_bundle(args: &JobArgs, id: String, created_at: String, e: Experiment) -> Bundle {
    let mut environment = stallscope_bundle::Environment {
        runner: Some(stallscope_core::envinfo::runner()),
        host: Some(stallscope_core::envinfo::host()),
        ..Default::default()
    };
    environment.command_line = if args.redact_args {
        vec!["stallscope job (arguments left out with --redact-args)".into()]
    } else {
        std::env::args().collect()
    };
    Bundle {
        schema_version: SchemaVersion::CURRENT,
        id,
        title: format!("Job: {}", args.command.first().map_or("", String::as_str)),
        created_at,
        provenance: Provenance::Measured,
        environment,
        experiments: vec![e],
        status: RunStatus {
            state: RunState::Running,
            message: None,
        },
        ranks: Vec::new(),
        notes: Vec::new(),
    }
}

/// What the job's DataLoader really used, per configuration: its settings
/// as parameters (`actual_*`), read back after construction; the script's
/// own configuration gets its values of the swept keys too.
fn record_what_ran(e: &mut Experiment, job: &JobExperiment) {
    let seen = job.seen.lock().unwrap_or_else(|x| x.into_inner());
    let swept = e.swept.clone();
    for (c, loader) in e.configurations.iter_mut().zip(seen.iter()) {
        for key in &swept {
            if c.params.contains_key(key) {
                continue;
            }
            if let Some(v) = loader.as_ref().and_then(|l| grid::param(&l[key.as_str()])) {
                c.params.insert(key.clone(), v);
            } else {
                c.not_applicable.insert(
                    key.clone(),
                    "the script's own setting, which was not read back (no unit completed, or \
                     the DataLoader reports none)"
                        .into(),
                );
            }
        }
        let Some(l) = loader else { continue };
        for key in grid::RECORDED {
            if let Some(v) = grid::param(&l[key]) {
                c.params.insert(format!("actual_{key}"), v);
            }
        }
    }
    if let Some(l) = seen.iter().flatten().next() {
        for key in ["class", "dataset", "sampler", "collate_fn"] {
            if let Some(v) = grid::param(&l[key]) {
                e.settings.insert(format!("dataloader_{key}"), v);
            }
        }
    }
}
