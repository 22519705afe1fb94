//! The ranks of a merged multi-rank bundle, per configuration: where each
//! rank's step goes (next-wait, transfer, compute, comm), how unequal their
//! step times are, and which rank the others waited for, step by step.
//!
//! Shares come from the diagnostic runs (synchronized stages: where a step
//! waits, not how fast it runs). The imbalance is of the whole-run step time
//! when every rank has one (methodology.md: diagnostic totals are not
//! performance), else of the diagnostic step median, and says which. With a
//! per-step synchronisation every rank waits for the slowest, so the
//! whole-run step times stay near equal whatever the cause; the *work*
//! imbalance (the diagnostic step without its comm) is what shows one rank
//! doing more. A merged bundle of format 1.3 holds the analysis already,
//! column-wise (`Configuration.ranks`); it is read back from there.

use std::collections::BTreeMap;

use crate::analysis::metric::{Metric, run_mode_known};
use crate::analysis::summary::median;
use crate::analysis::units::show_percent;
use crate::format::{Bundle, Configuration, Phase, Run, StepSeries, TimingMode};

mod model;
mod stragglers;

pub use model::{MATERIAL_COMM_SHARE, RankAnalysis, RankSummary};
use model::{median_in_place, step_parts};

/// The analysis of a configuration of a merged bundle (`None` when no run
/// carries a rank); the synchronisation is named generically.
pub fn rank_analysis(c: &Configuration) -> Option<RankAnalysis> {
    rank_analysis_with(c, None)
}

/// [`rank_analysis`], naming the synchronisation the bundle's ranks used
/// (their `layout.sync`, when they agree).
pub fn rank_analysis_in(b: &Bundle, c: &Configuration) -> Option<RankAnalysis> {
    let first = b.ranks.first().map(|r| r.layout.sync.as_str());
    let agreed = first.filter(|s| b.ranks.iter().all(|r| r.layout.sync == *s));
    rank_analysis_with(c, agreed)
}

/// "the barrier", "the all-reduce" or "the per-step synchronisation".
pub fn sync_phrase(sync: Option<&str>) -> &'static str {
    let s = sync.unwrap_or("").to_ascii_lowercase();
    if s.contains("barrier") {
        "the barrier"
    } else if s.contains("all_reduce") || s.contains("allreduce") || s.contains("all-reduce") {
        "the all-reduce"
    } else {
        "the per-step synchronisation"
    }
}

/// Sums of the four stages over a rank's diagnostic steps.
#[derive(Default, Clone, Copy)]
struct Stages {
    parts: [f64; 4],
    steps: u64,
}

fn series_len_ok(s: &StepSeries) -> bool {
    let n = s.next_wait_ns.len();
    s.transfer_ns.len() == n
        && s.compute_ns.len() == n
        && (s.comm_ns.is_empty() || s.comm_ns.len() == n)
}

fn stage_sums(runs: &[&Run]) -> Stages {
    let mut out = Stages::default();
    for r in runs
        .iter()
        .filter(|r| r.timing_mode == TimingMode::Diagnostic)
    {
        if let Some(s) = r
            .steps
            .as_ref()
            .filter(|s| series_len_ok(s) && !s.next_wait_ns.is_empty())
        {
            // A window after warm-up steps (a job's: no first next-wait
            // set apart) has no epoch's first step to leave out.
            let apart = r
                .diagnostic
                .as_ref()
                .is_none_or(|d| d.first_next_wait_s.is_some());
            let first = usize::from(apart && s.next_wait_ns.len() > 1);
            for i in first..s.next_wait_ns.len() {
                let p = step_parts(s, i);
                (0..4).for_each(|k| out.parts[k] += p[k]);
                out.steps += 1;
            }
        } else if let Some(d) = &r.diagnostic {
            let mean = |s: &Option<crate::StageStat>| s.as_ref().and_then(|s| s.mean_s);
            let (Some(w), Some(t), Some(c)) =
                (mean(&d.next_wait), mean(&d.transfer), mean(&d.compute))
            else {
                continue;
            };
            let n = d
                .next_wait
                .as_ref()
                .and_then(|s| s.count)
                .unwrap_or(1)
                .max(1);
            let p = [w, t, c, mean(&d.comm).unwrap_or(0.0)];
            (0..4).for_each(|k| out.parts[k] += p[k] * n as f64);
            out.steps += n;
        }
    }
    out
}

/// The largest value over the median of the others (with two ranks, the
/// slower over the faster; the plain median would be bounded by 2).
fn ratio_to_others(values: &[f64]) -> Option<f64> {
    let (i, max) = values
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let others: Vec<f64> = (0..values.len())
        .filter(|&j| j != i)
        .map(|j| values[j])
        .collect();
    let m = median(&others)?;
    (m > 0.0).then(|| max / m)
}

fn ratio_to_median(values: &[f64]) -> Option<f64> {
    let m = median(values)?;
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m > 0.0 && values.len() > 1).then(|| max / m)
}

/// [`rank_analysis`] with the synchronisation's name (`layout.sync`).
pub fn rank_analysis_with(c: &Configuration, sync: Option<&str>) -> Option<RankAnalysis> {
    if let Some(columns) = &c.ranks {
        return Some(crate::analysis::rank_columns::analysis_of_columns(columns));
    }
    let (phase, by_rank) = runs_by_rank(c)?;
    let (step_mode, step_medians) = step_medians(&by_rank);
    let mut notes = Vec::new();
    let aligned = align_steps(&by_rank, &mut notes);
    let steps_compared = aligned.steps;
    let (ranks, means) = summaries(&by_rank, step_medians, &aligned);
    let present: Vec<f64> = ranks.iter().filter_map(|r| r.step_median_s).collect();
    let mut stragglers: Vec<(u32, u64)> = aligned
        .times
        .iter()
        .filter(|(_, t)| **t > 0)
        .map(|(r, t)| (*r, *t))
        .collect();
    stragglers.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let verdict = verdict(
        &ranks,
        &means,
        &stragglers,
        steps_compared,
        sync_phrase(sync),
    );
    Some(RankAnalysis {
        phase,
        imbalance: ratio_to_median(&present),
        step_mode,
        work_imbalance: ratio_to_others(&aligned.work_medians),
        ranks,
        steps_compared,
        stragglers,
        verdict,
        notes,
    })
}

/// A configuration's ranked runs of one phase (steady when there are any)
/// by rank, each rank's in (repeat, epoch, id) order; `None` without ranks.
fn runs_by_rank(c: &Configuration) -> Option<(Phase, BTreeMap<u32, Vec<&Run>>)> {
    let ranked: Vec<&Run> = c
        .runs
        .iter()
        .filter(|r| r.rank.is_some() && run_mode_known(r))
        .collect();
    if ranked.is_empty() {
        return None;
    }
    let phase = if ranked.iter().any(|r| r.phase == Phase::Steady) {
        Phase::Steady
    } else {
        Phase::Cold
    };
    let mut by_rank: BTreeMap<u32, Vec<&Run>> = BTreeMap::new();
    for r in &ranked {
        let runs = by_rank.entry(r.rank.unwrap_or_default()).or_default();
        if r.phase == phase {
            runs.push(r);
        }
    }
    for runs in by_rank.values_mut() {
        runs.sort_by(|a, b| (a.repeat, a.epoch, &a.id).cmp(&(b.repeat, b.epoch, &b.id)));
    }
    Some((phase, by_rank))
}

/// The median of metric `m` over `runs` of `mode`.
fn of_runs(runs: &[&Run], mode: TimingMode, m: Metric) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter(|r| r.timing_mode == mode)
        .filter_map(|r| m.of_run(r))
        .collect();
    median(&v)
}

/// Each rank's median step time: whole-run when every rank has one, else
/// diagnostic, else none; with the mode it is of.
fn step_medians(by_rank: &BTreeMap<u32, Vec<&Run>>) -> (Option<TimingMode>, Vec<Option<f64>>) {
    let whole: Vec<Option<f64>> = by_rank
        .values()
        .map(|r| of_runs(r, TimingMode::WholeRun, Metric::StepTimeS))
        .collect();
    let diag: Vec<Option<f64>> = by_rank
        .values()
        .map(|r| of_runs(r, TimingMode::Diagnostic, Metric::StepMedianS))
        .collect();
    if whole.iter().all(Option::is_some) {
        (Some(TimingMode::WholeRun), whole)
    } else if diag.iter().all(Option::is_some) {
        (Some(TimingMode::Diagnostic), diag)
    } else {
        (None, vec![None; by_rank.len()])
    }
}

/// Each rank's summary, and its mean seconds per step of each stage.
fn summaries(
    by_rank: &BTreeMap<u32, Vec<&Run>>,
    step_medians: Vec<Option<f64>>,
    aligned: &Aligned,
) -> (Vec<RankSummary>, Vec<[f64; 4]>) {
    let steps_compared = aligned.steps;
    let mut ranks: Vec<RankSummary> = Vec::new();
    let mut means: Vec<[f64; 4]> = Vec::new();
    for ((&rank, runs), step_median_s) in by_rank.iter().zip(step_medians) {
        let s = stage_sums(runs);
        let total: f64 = s.parts.iter().sum();
        let share = |k: usize| (total > 0.0).then(|| s.parts[k] / total);
        means.push(
            s.parts
                .map(|p| if s.steps > 0 { p / s.steps as f64 } else { 0.0 }),
        );
        let times = aligned.times.get(&rank).copied().unwrap_or(0);
        ranks.push(RankSummary {
            rank,
            steps: s.steps,
            step_median_s,
            next_wait_share: share(0),
            transfer_share: share(1),
            compute_share: share(2),
            comm_share: share(3),
            straggler_steps: times,
            straggler_share: (steps_compared > 0).then(|| times as f64 / steps_compared as f64),
            samples_per_s: of_runs(runs, TimingMode::WholeRun, Metric::SamplesPerS),
        });
    }
    (ranks, means)
}

/// The steps every rank measured, aligned by repeat, epoch and step index.
struct Aligned {
    steps: u64,
    times: BTreeMap<u32, u64>,
    /// Per rank (ascending), the median work (stages but comm) of its steps.
    work_medians: Vec<f64>,
}

fn align_steps(by_rank: &BTreeMap<u32, Vec<&Run>>, notes: &mut Vec<String>) -> Aligned {
    let mut epochs: BTreeMap<(u32, u32), BTreeMap<u32, &StepSeries>> = BTreeMap::new();
    let mut work: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (&rank, runs) in by_rank {
        for r in runs
            .iter()
            .filter(|r| r.timing_mode == TimingMode::Diagnostic)
        {
            let Some(s) = r.steps.as_ref().filter(|s| series_len_ok(s)) else {
                continue;
            };
            epochs
                .entry((r.repeat, r.epoch))
                .or_default()
                .entry(rank)
                .or_insert(s);
            let w = work.entry(rank).or_default();
            w.extend((0..s.next_wait_ns.len()).map(|i| step_parts(s, i)[..3].iter().sum::<f64>()));
        }
    }
    let mut out = Aligned {
        steps: 0,
        times: by_rank.keys().map(|&r| (r, 0)).collect(),
        work_medians: work
            .into_values()
            .filter_map(|mut w| median_in_place(&mut w))
            .collect(),
    };
    if by_rank.len() < 2 {
        return out;
    }
    let (mut partial, mut cut) = (Vec::new(), Vec::new());
    for ((repeat, epoch), series) in &epochs {
        if series.len() != by_rank.len() {
            partial.push(format!("repeat {repeat} epoch {epoch}"));
            continue;
        }
        if series.values().any(|s| s.comm_ns.is_empty()) {
            continue;
        }
        let lens: Vec<usize> = series.values().map(|s| s.next_wait_ns.len()).collect();
        let (n, most) = (
            lens.iter().copied().min().unwrap_or(0),
            lens.iter().copied().max().unwrap_or(0),
        );
        if n != most {
            cut.push(format!(
                "repeat {repeat} epoch {epoch}: {n} of {n}–{most} steps"
            ));
        }
        for slow in stragglers::stragglers(series, n).into_iter().flatten() {
            *out.times.entry(slow).or_default() += 1;
        }
        out.steps += n as u64;
    }
    if !partial.is_empty() {
        notes.push(format!(
            "left out, not measured by every rank: {}.",
            partial.join(", ")
        ));
    }
    if !cut.is_empty() {
        notes.push(format!(
            "the ranks' step counts differ, so they are compared on the steps all of them have: {}.",
            cut.join("; ")
        ));
    }
    out
}

fn verdict(
    ranks: &[RankSummary],
    means: &[[f64; 4]],
    stragglers: &[(u32, u64)],
    steps: u64,
    sync: &str,
) -> Option<String> {
    if ranks.len() < 2 || steps == 0 {
        return None;
    }
    let threshold = show_percent(MATERIAL_COMM_SHARE);
    let material: u64 = stragglers.iter().map(|s| s.1).sum();
    let Some(&(slow, times)) = stragglers.first() else {
        return Some(format!(
            "The ranks kept pace: in none of the {steps} steps compared did the other ranks spend more than {threshold} of their step in {sync}."
        ));
    };
    // A straggler holds the others back in most of the steps compared.
    if times * 2 <= steps {
        let mut list: Vec<String> = stragglers
            .iter()
            .take(3)
            .map(|(r, t)| format!("rank {r} {t}×"))
            .collect();
        if stragglers.len() > 3 {
            list.push("…".into());
        }
        return Some(format!(
            "No one rank held the others back: in {material} of the {steps} steps compared the others spent more than {threshold} of their step in {sync}, and the slowest then was {}.",
            list.join(", ")
        ));
    }
    let i = ranks.iter().position(|r| r.rank == slow)?;
    let others: Vec<usize> = (0..ranks.len()).filter(|&j| j != i).collect();
    let mean_of = |f: &dyn Fn(&RankSummary) -> Option<f64>| {
        let v: Vec<f64> = others.iter().filter_map(|&j| f(&ranks[j])).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    // The stage in which the straggler exceeds the others most, in seconds.
    let excess = |k: usize| {
        means[i][k]
            - median(&others.iter().map(|&j| means[j][k]).collect::<Vec<_>>()).unwrap_or(0.0)
    };
    let stage = (0..3).max_by(|&a, &b| excess(a).total_cmp(&excess(b)))?;
    let share: fn(&RankSummary) -> Option<f64> = match stage {
        0 => |r| r.next_wait_share,
        1 => |r| r.transfer_share,
        _ => |r| r.compute_share,
    };
    let (own, theirs) = (
        share(&ranks[i]).unwrap_or(0.0),
        mean_of(&share).unwrap_or(0.0),
    );
    let what = match stage {
        0 => format!(
            "Rank {slow} waited for data {} of its step time",
            show_percent(own)
        ),
        1 => format!(
            "Rank {slow} spent {} of its step time in the host-to-device copy",
            show_percent(own)
        ),
        _ => format!(
            "Rank {slow} spent {} of its step time computing",
            show_percent(own)
        ),
    };
    let comm = mean_of(&|r: &RankSummary| r.comm_share).unwrap_or(0.0);
    Some(format!(
        "{what} (the other ranks {}) and was the slowest in {times} of the {steps} steps compared, while the other ranks spent {} of their step time in {sync} waiting for it.",
        show_percent(theirs),
        show_percent(comm)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Selection gives the sorted median, for generated lengths and values
    /// (ties and odd and even counts among them).
    #[test]
    fn median_by_selection_is_the_median() {
        let mut x: u64 = 0x5EED_0050;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for k in 0..1000 {
            let n = (next() % 40) as usize;
            let mut v: Vec<f64> = if k % 2 == 0 {
                (0..n).map(|_| (next() % 12) as f64 / 4.0).collect()
            } else {
                // Step times as the analysis makes them: ns × 1e-9, summed.
                (0..n)
                    .map(|_| (next() % 9_000_000) as f64 * 1e-9 + 3e-3)
                    .collect()
            };
            let want = median(&v).map(f64::to_bits);
            assert_eq!(median_in_place(&mut v).map(f64::to_bits), want, "{v:?}");
        }
    }
}
