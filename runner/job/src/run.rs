//! The job from its options to its bundle: the grid (the script's own
//! settings and `--sweep`'s points, or `--tune`'s grid from a probe), the
//! replay, the recommendation and its verification, each an experiment of
//! one bundle run by the one driver; then the final status, the save and
//! the ranks' bundles.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use stallscope_bundle::analysis::{JOB_ID, JOB_SCRIPT_ID, script_of, wait_unseen};
use stallscope_bundle::{
    Bundle, Experiment, ExperimentKind, Failure, ParamValue, Provenance, RunState, RunStatus,
    SchemaVersion,
};
use stallscope_core::{Progress, UnitCtx, bundle_id, final_status};

use crate::options::{JobError, JobEvents, JobOptions, JobOutcome};
use crate::session::Session;
use crate::unit::{JobExperiment, JobPlan};
use crate::{grid, repeats, replay, tune, verify, what_ran};

/// Run the job: every experiment it asks for, the bundle saved after each
/// unit; a stop ends it early with what was measured kept.
pub fn run(
    args: &JobOptions,
    stop: &AtomicBool,
    progress: &dyn Progress,
    events: &dyn JobEvents,
) -> Result<JobOutcome, JobError> {
    let sweep = grid::points(&args.sweep).map_err(JobError::Sweep)?;
    let (created_at, id) = bundle_id();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(&id));
    let plan = plan(args, &out_dir)?;
    let cx = UnitCtx {
        stop,
        progress,
        inject_panic: None,
    };
    let bundle = new_bundle(args, id, created_at);
    let mut s = Session::new(bundle, out_dir.join("bundle.json"), &cx);
    let compared = args.tune || !sweep.is_empty();
    let g = if compared {
        compared_grid(args, &plan, &cx, events, sweep)
    } else {
        Grid::plain()
    };
    s.bundle.notes.extend(g.notes.iter().cloned());
    let overrides = g.points.iter().map(|p| p.overrides.clone()).collect();
    let mut job = JobExperiment::new(plan.clone(), skeleton(args, &g), overrides);
    let index = s.drive(&mut job, args.repeats);
    if let (true, Some(i)) = (compared, index) {
        repeats::grow(&mut s, &mut job, i, args, events);
    }
    let own_crashed = index.is_some_and(|i| own_crashed(&s.bundle.experiments[i]));
    let unseen = index.is_some_and(|i| {
        let own = s.bundle.experiments[i].configuration(JOB_SCRIPT_ID);
        own.is_some_and(wait_unseen)
    });
    let replay = args.replay || args.tune || unseen;
    if own_crashed && replay {
        events.note("stallscope job: no replay: your settings crash here, so do they replayed");
    }
    if unseen && !own_crashed && !(args.replay || args.tune) {
        events.note(
            "stallscope job: your training thread's wait is not seen (its batches come through a \
             path stallscope does not hook): the replay measures the loader by difference",
        );
    }
    if replay && !own_crashed {
        let mut r = replay::job(&plan, args.replay_mib);
        if let Some(ri) = s.drive(&mut r, args.repeats) {
            let held = r.replayed.lock().unwrap_or_else(|e| e.into_inner()).clone();
            replay::record(&mut s.bundle.experiments[ri], held.as_ref());
        }
    }
    if let (Some(i), true, false) = (index, args.tune, s.interrupted) {
        verify::recommend(&mut s, &plan, args.verify_pairs, i, &job);
    }
    Ok(finish(s, &plan))
}

/// A job's configurations: the points, the keys they sweep, how they were
/// chosen, and what was left out.
struct Grid {
    points: Vec<grid::Point>,
    swept: Vec<String>,
    why: Option<String>,
    notes: Vec<String>,
}

impl Grid {
    /// Your settings alone.
    fn plain() -> Self {
        Grid {
            points: vec![grid::script()],
            swept: Vec::new(),
            why: None,
            notes: Vec::new(),
        }
    }
}

/// `--sweep`'s or `--tune`'s configurations after a probe of your settings:
/// yours first, then yours again (the A/A pair that measures this job's
/// noise), then the points that differ from yours.
fn compared_grid(
    args: &JobOptions,
    plan: &JobPlan,
    cx: &UnitCtx,
    events: &dyn JobEvents,
    sweep: Vec<grid::Point>,
) -> Grid {
    let mut g = Grid {
        points: vec![grid::script(), grid::script_again()],
        swept: grid::swept(&args.sweep),
        why: None,
        notes: Vec::new(),
    };
    match (tune::probe(plan, cx), args.tune) {
        (Ok(p), true) => {
            let (points, swept, why) = tune::grid(&p, args.warmup, args.steps);
            if let Some(f) = &p.crashed {
                // Nothing to measure the noise with: your settings do not run.
                g.points.truncate(1);
                events.note(&format!(
                    "stallscope job --tune: your settings crashed in the probe ({}); searching \
                     for settings that run",
                    tune::describe(f)
                ));
            }
            events.note(&format!("stallscope job --tune: {why}"));
            g.points.extend(points);
            (g.swept, g.why) = (swept, Some(why));
        }
        (Ok(p), false) => {
            let (points, notes) = grid::without_own(sweep, &p.loader);
            for n in &notes {
                events.note(&format!("stallscope job --sweep: {n}"));
            }
            g.points.extend(points);
            g.notes = notes;
        }
        (Err(e), tune) => {
            events.note(&format!(
                "stallscope job: your settings failed in the probe: {e}"
            ));
            if tune {
                g.why = Some(format!("none: the probe of your settings failed ({e})"));
            } else {
                g.points.extend(sweep);
            }
        }
    }
    g
}

fn plan(args: &JobOptions, out_dir: &Path) -> Result<JobPlan, JobError> {
    let work = out_dir.join("units");
    std::fs::create_dir_all(&work).map_err(|source| JobError::Folder {
        path: work.clone(),
        source,
    })?;
    Ok(JobPlan {
        command: args.command.clone(),
        warmup: args.warmup,
        steps: args.steps,
        loader: args.loader,
        timeout: Duration::from_secs_f64(args.timeout),
        work,
        python_dir: stallscope_python::packages_dir().map_err(JobError::Packages)?,
        ranks: Default::default(),
        known: std::sync::Arc::new(crate::fits::Known::new()),
    })
}

/// Your settings crashed in every repeat they ran (nothing to replay).
fn own_crashed(e: &Experiment) -> bool {
    e.configuration(grid::script().id.as_str())
        .is_some_and(|c| matches!(c.failure, Some(Failure::Crashed { .. })) && c.runs.is_empty())
}

/// The configurations whose failure is the job's: not a stop, and not,
/// when another configuration of the comparison ran, one that crashed or
/// would not fit (those are results of the search for settings that run).
fn failures(b: &Bundle) -> usize {
    b.experiments
        .iter()
        .map(|e| {
            let ran = e
                .configurations
                .iter()
                .any(|c| c.failure.is_none() && !c.runs.is_empty());
            e.configurations
                .iter()
                .filter_map(|c| c.failure.as_ref())
                .filter(|f| !matches!(f, Failure::Interrupted { .. }))
                .filter(|f| {
                    !(ran && matches!(f, Failure::Crashed { .. } | Failure::WouldNotFit { .. }))
                })
                .count()
        })
        .sum()
}

/// The final status and save, and the ranks' bundles when the command
/// launched ranks.
fn finish(mut s: Session, plan: &JobPlan) -> JobOutcome {
    s.bundle.environment.device = Some(what_ran::device(s.accelerator.as_deref()));
    s.failures = failures(&s.bundle);
    s.bundle.status = final_status(s.interrupted, s.failures);
    s.save();
    let dir = s.path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let ranks = plan.ranks.write(&s.bundle, &dir).unwrap_or_else(|e| {
        s.failures += 1;
        Some(format!("ranks: {e}"))
    });
    JobOutcome {
        bundle: s.bundle,
        path: s.path,
        ranks,
        failures: s.failures,
        interrupted: s.interrupted,
    }
}

/// The experiment: one configuration per point, the script's own first.
fn skeleton(args: &JobOptions, g: &Grid) -> Experiment {
    let mut e = Experiment::new(JOB_ID, ExperimentKind::Loader, "Your training job");
    e.description = Some(format!(
        "The command's own training loop, unmodified: its DataLoader (iteration index {}) \
         measured over {} training steps after {} warm-up steps, in a fresh process per timing \
         mode and repeat. A step is the training thread's, from one optimizer step to the next; \
         its data wait is the time that thread was blocked getting its batches. Whole-run: no \
         synchronisation inside the window; diagnostic: the device synchronised at the step's \
         boundaries, around the data wait and around the batch's host-to-device copies.",
        args.loader, args.steps, args.warmup
    ));
    e.swept = g.swept.clone();
    e.baseline = g.points.first().map(|p| p.id.clone());
    e.configurations = g.points.iter().map(grid::Point::configuration).collect();
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
    if let Some(why) = &g.why {
        e.settings
            .insert("tune_grid".into(), ParamValue::from(why.as_str()));
    }
    e
}

fn new_bundle(args: &JobOptions, id: String, created_at: String) -> Bundle {
    let mut environment = stallscope_bundle::Environment {
        runner: Some(stallscope_core::runner_info()),
        host: Some(stallscope_core::host_info()),
        limits: Some(stallscope_core::read_limits()),
        ..Default::default()
    };
    environment.command_line = if args.redact_args {
        vec!["stallscope job (arguments left out with --redact-args)".into()]
    } else {
        args.command_line.clone()
    };
    Bundle {
        schema_version: SchemaVersion::CURRENT,
        id,
        title: format!(
            "Job: {}",
            script_of(&args.command.join(" ")).unwrap_or_default()
        ),
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
