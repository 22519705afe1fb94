//! A merged bundle in the shape of format 1.3: each configuration whose runs
//! carry ranks keeps the job's runs (`analysis::job_runs`) and its ranks'
//! analysis column-wise (`Configuration.ranks`), and every rank's per-step
//! series go to sidecar files ([`crate::sidecar`]), one per stage. The
//! bundle's size then grows with the ranks only by a few numbers per rank,
//! not by runs × steps. Pure: the files' names and bytes are returned.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::analysis::{job_runs, rank_analysis_with, rank_columns};
use crate::format::{
    Bundle, Configuration, RankSidecar, Run, SchemaVersion, StepSeries, TimingMode,
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
        Cow::Owned(compact_with(b.clone(), false).bundle)
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
    compact_with(b, true)
}

fn compact_with(mut b: Bundle, sidecars: bool) -> Compacted {
    let world = (!b.ranks.is_empty()).then_some(b.ranks.len() as u32);
    let sync = {
        let first = b.ranks.first().map(|r| r.layout.sync.clone());
        first.filter(|s| b.ranks.iter().all(|r| r.layout.sync == *s))
    };
    let mut files = Vec::new();
    let mut changed = false;
    let id = b.id.clone();
    for (ei, e) in b.experiments.iter_mut().enumerate() {
        for (ci, c) in e.configurations.iter_mut().enumerate() {
            if c.ranks.is_some() || !c.runs.iter().any(|r| r.rank.is_some()) {
                continue;
            }
            changed = true;
            let cid = c.id.clone();
            let place = Place {
                bundle_id: &id,
                experiment: (ei, &e.id),
                configuration: (ci, &cid),
            };
            files.extend(compact_configuration(
                c,
                world,
                sync.as_deref(),
                &place,
                sidecars,
            ));
        }
    }
    if changed {
        b.schema_version = SchemaVersion::CURRENT;
    }
    Compacted {
        bundle: b,
        sidecars: files,
    }
}

struct Place<'a> {
    bundle_id: &'a str,
    experiment: (usize, &'a str),
    configuration: (usize, &'a str),
}

fn compact_configuration(
    c: &mut Configuration,
    world: Option<u32>,
    sync: Option<&str>,
    place: &Place,
    sidecars: bool,
) -> Vec<(String, Vec<u8>)> {
    let Some(a) = rank_analysis_with(c, sync) else {
        return Vec::new();
    };
    let (jobs, notes) = job_runs(c, world);
    let world = world.unwrap_or(a.ranks.len() as u32);
    let mut columns = rank_columns(&a, world);
    columns.notes.extend(notes);
    let mut files = Vec::new();
    if sidecars {
        for stage in stage_steps(c, place) {
            let bytes = encode(&stage);
            let file = sidecar_name(
                place.bundle_id,
                place.experiment.0,
                place.configuration.0,
                &stage.stage,
            );
            columns.sidecars.push(RankSidecar {
                stage: stage.stage.clone(),
                file: file.clone(),
                bytes: bytes.len() as u64,
                fnv64: hex64(fnv64(&bytes)),
            });
            files.push((file, bytes));
        }
    }
    let mut runs: Vec<Run> = std::mem::take(&mut c.runs)
        .into_iter()
        .filter(|r| r.rank.is_none())
        .collect();
    runs.extend(jobs);
    c.runs = runs;
    c.ranks = Some(columns);
    files
}

fn stage_column<'a>(s: &'a StepSeries, stage: &str) -> &'a [u64] {
    match stage {
        "next_wait" => &s.next_wait_ns,
        "transfer" => &s.transfer_ns,
        "compute" => &s.compute_ns,
        _ => &s.comm_ns,
    }
}

/// Every stage's series of the configuration's ranked diagnostic runs, per
/// (repeat, epoch); a stage no rank recorded (comm of one process) is left
/// out.
fn stage_steps(c: &Configuration, place: &Place) -> Vec<StageSteps> {
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
    STAGES
        .iter()
        .filter_map(|&stage| {
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
        })
        .collect()
}
