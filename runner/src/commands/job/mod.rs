//! `stallscope job [OPTIONS] -- COMMAND [ARGS...]`: the user's own training
//! command, unmodified, measured in both timing modes (docs/your-job.md).
//! Each configuration (the script's own DataLoader settings, and each point
//! of `--sweep` or of `--tune`'s grid) is a unit of the one driver: repeats
//! in ascending, descending, ascending order, Ctrl-C, the bundle saved after
//! every unit; each mode of a unit is a fresh process tree (`unit.rs`).
//! `--replay` adds the loop with the loader free (`replay.rs`); `--tune`
//! chooses its grid (`tune.rs`), recommends and verifies (`verify.rs`). The
//! Python side is `python/stallscope_job` (`docs/job-protocol.md`).

mod grid;
mod ranks;
mod records;
mod replay;
mod session;
mod tune;
mod unit;
mod verify;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use stallscope_bundle::{
    Bundle, Experiment, ExperimentKind, ParamValue, Provenance, RunState, RunStatus, SchemaVersion,
};
use stallscope_core::driver::{NoProgress, UnitCtx};
use stallscope_core::engine::{bundle_id, final_status};

use super::run::{STOP, exit_code, install_ctrlc, print_report};
use crate::cli::JobArgs;
use crate::report::{Style, text};
use session::Session;
use unit::{JobExperiment, JobPlan};

pub fn run(args: &JobArgs) -> anyhow::Result<ExitCode> {
    install_ctrlc()?;
    let sweep = grid::points(&args.sweep)?;
    let (created_at, id) = bundle_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("out").join(&id));
    let plan = plan(args, &out_dir)?;
    let cx = UnitCtx {
        stop: &STOP,
        progress: &NoProgress,
        inject_panic: None,
    };
    let bundle = new_bundle(args, id, created_at);
    let mut s = Session::new(bundle, out_dir.join("bundle.json"), &cx);
    let (points, swept, why) = if args.tune {
        tuned_grid(&plan, &cx)
    } else {
        (sweep, grid::swept(&args.sweep), None)
    };
    let overrides = points.iter().map(|p| p.overrides.clone()).collect();
    let mut job = JobExperiment::new(plan.clone(), skeleton(args, &points, swept, why), overrides);
    let index = s.drive(&mut job, args.repeats);
    let mut closing = Vec::new();
    if args.replay || args.tune {
        let mut r = replay::job(&plan, args.replay_mib);
        if let Some(ri) = s.drive(&mut r, args.repeats) {
            let held = r.replayed.lock().unwrap_or_else(|e| e.into_inner()).clone();
            replay::record(&mut s.bundle.experiments[ri], held.as_ref());
        }
    }
    match index {
        Some(i) if args.tune && !s.interrupted => {
            closing = verify::recommend(&mut s, &plan, args.verify_pairs, i, &job);
        }
        Some(_) if args.replay => closing.extend(replay::sentence(&s.bundle)),
        _ => {}
    }
    Ok(finish(s, args.output.style(), &closing, &plan))
}

fn plan(args: &JobArgs, out_dir: &Path) -> anyhow::Result<JobPlan> {
    let work = out_dir.join("units");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    Ok(JobPlan {
        command: args.command.clone(),
        warmup: args.warmup,
        steps: args.steps,
        loader: args.loader,
        timeout: Duration::from_secs_f64(args.timeout),
        work,
        python_dir: stallscope_peers::harness::dir().map_err(anyhow::Error::msg)?,
        ranks: Default::default(),
    })
}

/// `--tune`'s grid from a probe of the script's own settings; the script's
/// settings alone when the probe fails (their failure is then recorded).
fn tuned_grid(plan: &JobPlan, cx: &UnitCtx) -> (Vec<grid::Point>, Vec<String>, Option<String>) {
    match tune::probe(plan, cx) {
        Ok(p) => {
            let (points, swept, why) = tune::grid(&p);
            eprintln!(
                "{}",
                text::wrap(
                    &format!("stallscope job --tune: {why}"),
                    "",
                    "  ",
                    text::WIDTH
                )
                .trim_end()
            );
            (points, swept, Some(why))
        }
        Err(e) => {
            eprintln!("stallscope job --tune: the script's own settings failed in the probe: {e}");
            let why = format!("none: the probe of the script's own settings failed ({e})");
            (vec![grid::script()], Vec::new(), Some(why))
        }
    }
}

/// The final status and save, the ranks' bundles when the command launched
/// ranks, the report, then `closing` (the replay's sentence or the
/// recommendation) within 100 columns.
fn finish(mut s: Session, style: Style, closing: &[String], plan: &JobPlan) -> ExitCode {
    s.bundle.environment.device = Some(device(s.accelerator.as_deref()));
    s.bundle.status = final_status(s.interrupted, s.failures);
    s.save();
    let dir = s.path.parent().unwrap_or(Path::new("."));
    let ranks = plan.ranks.write(&s.bundle, dir).unwrap_or_else(|e| {
        s.failures += 1;
        Some(format!("ranks: {e:#}"))
    });
    print_report(&s.bundle, &s.path, style);
    if let Some(line) = ranks {
        eprint!("{}", text::wrap(&line, "", "  ", text::WIDTH));
    }
    if !closing.is_empty() {
        let mut out = String::from("\n");
        for (i, p) in closing.iter().enumerate() {
            out += &text::wrap(p, if i == 0 { "" } else { "  " }, "  ", text::WIDTH);
        }
        match style {
            Style::Compact | Style::Wide => print!("{out}"),
            _ => eprint!("{out}"),
        }
    }
    exit_code(s.interrupted, s.failures)
}

/// The experiment: one configuration per point, the script's own first.
fn skeleton(
    args: &JobArgs,
    points: &[grid::Point],
    swept: Vec<String>,
    grid_why: Option<String>,
) -> Experiment {
    let mut e = Experiment::new("job", ExperimentKind::Loader, "Your training job");
    e.description = Some(format!(
        "The command's own training loop, unmodified: its DataLoader (iteration index {}) \
         measured over {} steps after {} warm-up steps, in a fresh process per timing mode and \
         repeat. Whole-run: no synchronisation inside the window; diagnostic: the device \
         synchronised around next() and around the batch's host-to-device copies.",
        args.loader, args.steps, args.warmup
    ));
    e.swept = swept;
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
    if let Some(why) = grid_why {
        e.settings.insert("tune_grid".into(), ParamValue::from(why));
    }
    e
}

/// The device the job trained on, as its processes said (`done`'s
/// `accelerator`), else the CPU.
pub(super) fn device(accelerator: Option<&str>) -> stallscope_bundle::DeviceInfo {
    use stallscope_bundle::{DeviceInfo, DeviceKind};
    match accelerator {
        Some(name) => DeviceInfo::new(DeviceKind::Cuda, name),
        None => DeviceInfo::new(
            DeviceKind::Cpu,
            stallscope_core::envinfo::cpu_model().unwrap_or_else(|| "CPU".into()),
        ),
    }
}

fn new_bundle(args: &JobArgs, id: String, created_at: String) -> Bundle {
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
        experiments: Vec::new(),
        status: RunStatus {
            state: RunState::Running,
            message: None,
        },
        ranks: Vec::new(),
        notes: Vec::new(),
    }
}

/// What the job's DataLoader really used, per configuration: its settings
/// as parameters (`actual_*`, and `actual_iterable_dataset` for an
/// IterableDataset), read back after construction; the script's own
/// configuration gets its values of the swept keys too. Returns the
/// loader's notes (an IterableDataset duplicated across workers), each
/// prefixed with its configuration, for the bundle's notes.
fn record_what_ran(e: &mut Experiment, job: &JobExperiment) -> Vec<String> {
    let mut notes = Vec::new();
    let seen = job.seen.lock().unwrap_or_else(|x| x.into_inner());
    let swept = e.swept.clone();
    for (c, loader) in e.configurations.iter_mut().zip(seen.iter()) {
        for key in &swept {
            if c.params.contains_key(key) {
                continue;
            }
            if let Some(v) = loader.as_ref().and_then(|l| grid::param(&l[key.as_str()])) {
                // Read back by a later unit than the last save's.
                c.not_applicable.remove(key);
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
        if l["iterable_dataset"] == true {
            c.params
                .insert("actual_iterable_dataset".into(), ParamValue::from(true));
        }
        for n in l["notes"].as_array().into_iter().flatten() {
            if let Some(n) = n.as_str() {
                notes.push(format!("{} ({}): {n}", e.id, c.id));
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
    notes
}
