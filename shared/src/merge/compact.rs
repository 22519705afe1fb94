//! A merged bundle in the shape of format 1.3: each configuration whose runs
//! carry ranks keeps its pooled runs (`analysis::pooled_runs`) and its ranks'
//! analysis column-wise (`Configuration.ranks`), and every rank's per-step
//! series go to sidecar files ([`crate::sidecar`]), one per stage. The
//! bundle's size then grows with the ranks only by a few numbers per rank,
//! not by runs × steps. Pure: the files' names and bytes are returned.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::analysis::{pooled_runs, rank_analysis_with, rank_columns};
use crate::format::{
    Bundle, Configuration, RankColumns, RankSidecar, Run, SchemaVersion, StepSeries, TimingMode,
};
use crate::sidecar::{RunSteps, StageSteps, encode, fnv64, hex64};

/// The stages a sidecar can hold, in the order they are written.
pub const STAGES: [&str; 4] = ["next_wait", "transfer", "compute", "comm"];

/// A compacted bundle and its sidecar files (name, bytes).
#[derive(Debug, Clone)]
pub struct Compacted {
    pub bundle: Bundle,
    pub sidecars: Vec<(String, Vec<u8>)>,
}

/// Whether any configuration's runs carry ranks (a merged bundle of 1.2).
pub fn has_ranked_runs(b: &Bundle) -> bool {
    b.experiments
        .iter()
        .flat_map(|e| &e.configurations)
        .any(|c| c.ranks.is_none() && c.runs.iter().any(|r| r.rank.is_some()))
}

/// The bundle as figures are read from it: a merged bundle of format 1.2
/// compacted (its runs the job's, no sidecars), any other as it is.
pub fn job_view(b: &Bundle) -> Cow<'_, Bundle> {
    if has_ranked_runs(b) {
        Cow::Owned(compact_with(b.clone(), false, 1).bundle)
    } else {
        Cow::Borrowed(b)
    }
}

/// The sidecar's file name: the bundle id (made safe) and the place.
pub fn sidecar_name(
    bundle_id: &str,
    experiment: usize,
    configuration: usize,
    stage: &str,
) -> String {
    let safe: String = bundle_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.e{experiment}c{configuration}.{stage}.ssrs")
}

/// Compact a merged bundle; a bundle without ranked runs comes back as it
/// is (its version raised only when something changed).
pub fn compact(b: Bundle) -> Compacted {
    compact_with(b, true, 1)
}

/// [`compact`] with its work (each configuration's rank analysis and job
/// runs, each stage's sidecar) shared among up to `threads` threads; the
/// same bundle and files as [`compact`], in the same order. 1 thread (what
/// the viewer, on wasm32, uses) spawns none.
pub fn compact_on(b: Bundle, threads: usize) -> Compacted {
    compact_with(b, true, threads)
}

/// One piece of a compaction's work: it reads the bundle, never changes it.
enum Task {
    /// The rank analysis, the columns and the job runs of configuration
    /// `at` (of the places compacted).
    Columns { at: usize },
    /// One stage's sidecar of configuration `at`.
    Stage { at: usize, stage: &'static str },
}

type Columns = Option<(RankColumns, Vec<Run>)>;
type StageFile = Option<(RankSidecar, (String, Vec<u8>))>;

/// What a [`Task`] gave.
enum Done {
    /// Boxed: a configuration's columns are large beside a stage's record.
    Columns(Box<Columns>),
    Stage(StageFile),
}

fn compact_with(mut b: Bundle, sidecars: bool, threads: usize) -> Compacted {
    // The configurations to compact, as (experiment, configuration) indices.
    let places: Vec<(usize, usize)> = b
        .experiments
        .iter()
        .enumerate()
        .flat_map(|(ei, e)| {
            e.configurations
                .iter()
                .enumerate()
                .filter(|(_, c)| c.ranks.is_none() && c.runs.iter().any(|r| r.rank.is_some()))
                .map(move |(ci, _)| (ei, ci))
        })
        .collect();
    let mut tasks = Vec::new();
    for at in 0..places.len() {
        tasks.push(Task::Columns { at });
        if sidecars {
            tasks.extend(STAGES.iter().map(|&stage| Task::Stage { at, stage }));
        }
    }
    let done = run_tasks(&tasks, threads, |t| work(&b, &places, t));
    let mut columns: Vec<Columns> = Vec::new();
    let mut stages: Vec<Vec<StageFile>> = Vec::new();
    for d in done {
        match d {
            Done::Columns(c) => {
                columns.push(*c);
                stages.push(Vec::new());
            }
            Done::Stage(s) => stages
                .last_mut()
                .expect("a configuration's columns first")
                .push(s),
        }
    }
    let mut files = Vec::new();
    for ((&(ei, ci), cols), stage_files) in places.iter().zip(columns).zip(stages) {
        let c = &mut b.experiments[ei].configurations[ci];
        files.extend(apply(c, cols, stage_files));
    }
    if !places.is_empty() {
        b.schema_version = SchemaVersion::CURRENT;
    }
    Compacted {
        bundle: b,
        sidecars: files,
    }
}

/// One task's work on the bundle as merged.
fn work(b: &Bundle, places: &[(usize, usize)], t: &Task) -> Done {
    let (Task::Columns { at } | Task::Stage { at, .. }) = *t;
    let (ei, ci) = places[at];
    let e = &b.experiments[ei];
    let c = &e.configurations[ci];
    match *t {
        Task::Columns { .. } => {
            let world = (!b.ranks.is_empty()).then_some(b.ranks.len() as u32);
            let first = b.ranks.first().map(|r| r.layout.sync.as_str());
            let sync = first.filter(|s| b.ranks.iter().all(|r| r.layout.sync == *s));
            Done::Columns(Box::new(columns_and_pooled(c, world, sync)))
        }
        Task::Stage { stage, .. } => {
            let place = Place {
                bundle_id: &b.id,
                experiment: (ei, &e.id),
                configuration: (ci, &c.id),
            };
            Done::Stage(stage_file(c, &place, stage))
        }
    }
}

/// A configuration in format 1.3's shape: its pooled runs for its ranks' runs,
/// its ranks as columns naming the sidecars; returns the sidecars. Without
/// a rank analysis it stays as it was, and its stages' files are dropped.
fn apply(
    c: &mut Configuration,
    columns: Columns,
    stages: Vec<StageFile>,
) -> Vec<(String, Vec<u8>)> {
    let Some((mut columns, pooled)) = columns else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for (record, file) in stages.into_iter().flatten() {
        columns.sidecars.push(record);
        files.push(file);
    }
    let mut runs: Vec<Run> = std::mem::take(&mut c.runs)
        .into_iter()
        .filter(|r| r.rank.is_none())
        .collect();
    runs.extend(pooled);
    c.runs = runs;
    c.ranks = Some(columns);
    files
}

/// `work` of every task, in the tasks' order, on up to `threads` threads
/// (each takes the next task not yet taken, so a slow one holds no other).
fn run_tasks<T: Sync, R: Send>(
    tasks: &[T],
    threads: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.min(tasks.len());
    if threads <= 1 {
        return tasks.iter().map(work).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(t) = tasks.get(i) else { break mine };
                        mine.push((i, work(t)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a compacting thread panicked"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

struct Place<'a> {
    bundle_id: &'a str,
    experiment: (usize, &'a str),
    configuration: (usize, &'a str),
}

/// A configuration's ranks as columns (with the pooled runs' notes) and its
/// pooled runs; `None` without a rank analysis.
fn columns_and_pooled(
    c: &Configuration,
    world: Option<u32>,
    sync: Option<&str>,
) -> Option<(RankColumns, Vec<Run>)> {
    let a = rank_analysis_with(c, sync)?;
    let (pooled, notes) = pooled_runs(c, world);
    let world = world.unwrap_or(a.ranks.len() as u32);
    let mut columns = rank_columns(&a, world);
    columns.notes.extend(notes);
    Some((columns, pooled))
}

/// One stage's sidecar of a configuration and its record; `None` when no
/// rank recorded the stage.
fn stage_file(
    c: &Configuration,
    place: &Place,
    stage: &str,
) -> Option<(RankSidecar, (String, Vec<u8>))> {
    let steps = stage_steps(c, place, stage)?;
    let bytes = encode(&steps);
    let file = sidecar_name(
        place.bundle_id,
        place.experiment.0,
        place.configuration.0,
        stage,
    );
    let record = RankSidecar {
        stage: stage.to_string(),
        file: file.clone(),
        bytes: bytes.len() as u64,
        fnv64: hex64(fnv64(&bytes)),
    };
    Some((record, (file, bytes)))
}

fn stage_column<'a>(s: &'a StepSeries, stage: &str) -> &'a [u64] {
    match stage {
        "next_wait" => &s.next_wait_ns,
        "transfer" => &s.transfer_ns,
        "compute" => &s.compute_ns,
        _ => &s.comm_ns,
    }
}

/// One stage's series of the configuration's ranked diagnostic runs, per
/// (repeat, epoch); `None` for a stage no rank recorded (comm of one
/// process).
fn stage_steps(c: &Configuration, place: &Place, stage: &str) -> Option<StageSteps> {
    let mut by_run: BTreeMap<(u32, u32), BTreeMap<u32, &Run>> = BTreeMap::new();
    for r in &c.runs {
        if let (Some(rank), Some(_), TimingMode::Diagnostic) = (r.rank, &r.steps, &r.timing_mode) {
            by_run
                .entry((r.repeat, r.epoch))
                .or_default()
                .entry(rank)
                .or_insert(r);
        }
    }
    let runs: Vec<RunSteps> = by_run
        .iter()
        .map(|((repeat, epoch), ranks)| {
            let rows: Vec<(u32, &[u64])> = ranks
                .iter()
                .map(|(&k, r)| {
                    (
                        k,
                        r.steps.as_ref().map_or(&[][..], |s| stage_column(s, stage)),
                    )
                })
                .collect();
            let phase = ranks
                .values()
                .next()
                .map(|r| r.phase)
                .unwrap_or(crate::Phase::Steady);
            RunSteps::from_rows(*repeat, *epoch, phase, &rows)
        })
        .collect();
    let any = runs.iter().any(|r| r.lens.iter().any(|&l| l > 0));
    any.then(|| StageSteps {
        bundle_id: place.bundle_id.to_string(),
        experiment: place.experiment.1.to_string(),
        configuration: place.configuration.1.to_string(),
        stage: stage.to_string(),
        runs,
    })
}
