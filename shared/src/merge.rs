//! Merging the per-rank bundles of one ranked run (`bundle.rank-R.json`,
//! one per process) into one bundle with a rank dimension: every rank's
//! layout and host in `Bundle.ranks`, every run tagged with its rank
//! (`Run.rank`, id `rank{R}-…`), configurations matched by (experiment id,
//! configuration id). Pure: no filesystem (the `merge` command reads and
//! writes the files).

use std::collections::HashMap;

mod compact;
pub use compact::*;

use crate::format::{Bundle, Failure, RankHost, RankLayout, RunState, RunStatus};

/// Why bundles cannot be merged; each names the bundle and what was
/// expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    #[error("no bundles to merge; expected the per-rank bundles of one run")]
    Empty,
    #[error("bundle {bundle}: no rank layout (environment.rank); expected a bundle a rank wrote")]
    NotRanked { bundle: String },
    #[error("bundles {first} and {second} are both rank {rank}; expected one bundle per rank")]
    DuplicateRank {
        rank: u32,
        first: String,
        second: String,
    },
    #[error(
        "bundle {bundle} (rank {rank}) has world size {found}; expected {expected} as bundle \
         {reference} (rank {reference_rank}) has"
    )]
    WorldSize {
        bundle: String,
        rank: u32,
        found: u32,
        expected: u32,
        reference: String,
        reference_rank: u32,
    },
    #[error("rank {rank} of bundle {bundle} is not below its world size {world}")]
    RankOutOfRange {
        bundle: String,
        rank: u32,
        world: u32,
    },
    #[error(
        "no bundle for rank(s) {}; expected one for each of the {world} ranks",
        list(missing)
    )]
    MissingRanks { missing: Vec<u32>, world: u32 },
    #[error(
        "bundle {bundle} (rank {rank}) ran suite {found:?}; expected the suite of bundle \
         {reference} (rank {reference_rank}), {expected:?}, on every rank"
    )]
    DifferentSuite {
        bundle: String,
        rank: u32,
        found: String,
        expected: String,
        reference: String,
        reference_rank: u32,
    },
}

impl MergeError {
    /// The ids of the bundles the error names (the command maps them to files).
    pub fn bundles(&self) -> Vec<&str> {
        match self {
            MergeError::NotRanked { bundle } | MergeError::RankOutOfRange { bundle, .. } => {
                vec![bundle]
            }
            MergeError::DuplicateRank { first, second, .. } => vec![first, second],
            MergeError::WorldSize {
                bundle, reference, ..
            }
            | MergeError::DifferentSuite {
                bundle, reference, ..
            } => vec![bundle, reference],
            MergeError::Empty | MergeError::MissingRanks { .. } => Vec::new(),
        }
    }
}

fn list(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A suite's identity for the comparison: its name and TOML text.
fn suite_of(b: &Bundle) -> String {
    b.environment
        .suite
        .as_ref()
        .map_or_else(String::new, |s| format!("{}\n{}", s.name, s.toml))
}

fn suite_name(b: &Bundle) -> String {
    b.environment
        .suite
        .as_ref()
        .map_or_else(|| "(none)".into(), |s| s.name.clone())
}

/// The failure with its message prefixed `rank R: `.
pub fn prefix_failure(failure: Failure, rank: u32) -> Failure {
    let p = |m: String| format!("rank {rank}: {m}");
    match failure {
        Failure::OutOfMemory(mut oom) => {
            oom.message = Some(p(oom.message.unwrap_or_else(|| "out of memory".into())));
            Failure::OutOfMemory(oom)
        }
        Failure::WorkerError {
            worker,
            sample,
            message,
        } => Failure::WorkerError {
            worker,
            sample,
            message: p(message),
        },
        Failure::Panic { message } => Failure::Panic {
            message: p(message),
        },
        Failure::Interrupted { message } => Failure::Interrupted {
            message: p(message),
        },
        Failure::Error { message } => Failure::Error {
            message: p(message),
        },
        Failure::CommTimeout {
            operation,
            timeout_s,
            missing_ranks,
            message,
        } => Failure::CommTimeout {
            operation,
            timeout_s,
            missing_ranks,
            message: p(message),
        },
        Failure::WouldNotFit {
            resource,
            needed_bytes,
            available_bytes,
            message,
        } => Failure::WouldNotFit {
            resource,
            needed_bytes,
            available_bytes,
            message: p(message),
        },
        Failure::Crashed {
            cause,
            signal,
            exit_code,
            message,
            detail,
        } => Failure::Crashed {
            cause,
            signal,
            exit_code,
            message: p(message),
            detail,
        },
        Failure::Script {
            message,
            exception,
            at,
            traceback,
        } => Failure::Script {
            message: p(message),
            exception,
            at,
            traceback,
        },
        Failure::Unknown { kind, message } => Failure::Unknown {
            kind,
            message: Some(p(message.unwrap_or_default())),
        },
    }
}

/// The ranks of one run, sorted by rank: each once, of one world and one
/// suite, every rank of the world there. Returns the world size.
fn consistent(ranked: &[(RankLayout, Bundle)]) -> Result<u32, MergeError> {
    let Some((first_layout, first)) = ranked.first() else {
        return Err(MergeError::Empty);
    };
    let world = first_layout.world_size;
    let (reference, reference_rank) = (first.id.clone(), first_layout.rank);
    let suite = suite_of(first);
    for pair in ranked.windows(2) {
        if pair[0].0.rank == pair[1].0.rank {
            return Err(MergeError::DuplicateRank {
                rank: pair[0].0.rank,
                first: pair[0].1.id.clone(),
                second: pair[1].1.id.clone(),
            });
        }
    }
    for (l, b) in ranked {
        if l.world_size != world {
            return Err(MergeError::WorldSize {
                bundle: b.id.clone(),
                rank: l.rank,
                found: l.world_size,
                expected: world,
                reference: reference.clone(),
                reference_rank,
            });
        }
        if l.rank >= world {
            return Err(MergeError::RankOutOfRange {
                bundle: b.id.clone(),
                rank: l.rank,
                world,
            });
        }
        if suite_of(b) != suite {
            return Err(MergeError::DifferentSuite {
                bundle: b.id.clone(),
                rank: l.rank,
                found: suite_name(b),
                expected: suite_name(&ranked[0].1),
                reference: reference.clone(),
                reference_rank,
            });
        }
    }
    if ranked.len() != world as usize {
        let present: Vec<u32> = ranked.iter().map(|(l, _)| l.rank).collect();
        let missing = (0..world)
            .filter(|r| present.binary_search(r).is_err())
            .collect();
        return Err(MergeError::MissingRanks { missing, world });
    }
    Ok(world)
}

/// Merge the bundles of every rank of one run (any order) into one.
pub fn merge(bundles: Vec<Bundle>) -> Result<Bundle, MergeError> {
    let mut ranked = Vec::with_capacity(bundles.len());
    for b in bundles {
        let Some(layout) = b.environment.rank.clone() else {
            return Err(MergeError::NotRanked { bundle: b.id });
        };
        ranked.push((layout, b));
    }
    ranked.sort_by_key(|(l, _)| l.rank);
    let world = consistent(&ranked)?;

    let mut iter = ranked.into_iter();
    let (_, mut out) = iter.next().expect("at least one bundle");
    let rank0 = std::mem::take(&mut out.experiments);
    let mut hosts = vec![rank_host(&out)];
    let mut incomplete = vec![(0u32, out.status.clone())];
    out.environment.rank = None;
    out.id = format!("{}-merged", out.id);
    out.title = format!("{} ({world} ranks)", out.title);
    out.notes.push(format!(
        "Merged from {world} per-rank bundles: the environment is rank 0's; every rank's \
         layout and host are under ranks, every run carries its rank."
    ));
    // (experiment id, configuration id) → the configuration's index in its experiment.
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    let mut experiments_at: HashMap<String, usize> = HashMap::new();
    let mut add = |out: &mut Bundle, rank: u32, experiments: Vec<crate::format::Experiment>| {
        for mut e in experiments {
            let configurations = std::mem::take(&mut e.configurations);
            let ei = match experiments_at.get(&e.id) {
                Some(&ei) => ei,
                None => {
                    experiments_at.insert(e.id.clone(), out.experiments.len());
                    out.experiments.push(e.clone());
                    out.experiments.len() - 1
                }
            };
            for mut c in configurations {
                let mut runs = std::mem::take(&mut c.runs);
                for r in &mut runs {
                    r.rank = Some(rank);
                    r.id = format!("rank{rank}-{}", r.id);
                }
                let failure = c.failure.take();
                let key = (e.id.clone(), c.id.clone());
                let ci = match index.get(&key) {
                    Some(&ci) => ci,
                    None => {
                        let list = &mut out.experiments[ei].configurations;
                        index.insert(key, list.len());
                        list.push(c);
                        list.len() - 1
                    }
                };
                let target = &mut out.experiments[ei].configurations[ci];
                target.runs.append(&mut runs);
                // Ranks come in ascending order: the first failure is the
                // lowest failing rank's.
                if target.failure.is_none()
                    && let Some(f) = failure
                {
                    target.failure = Some(prefix_failure(f, rank));
                }
            }
        }
    };
    add(&mut out, 0, rank0);
    for (layout, mut b) in iter {
        hosts.push(rank_host(&b));
        incomplete.push((layout.rank, b.status.clone()));
        add(&mut out, layout.rank, std::mem::take(&mut b.experiments));
    }
    out.ranks = hosts;
    out.status = merged_status(&incomplete);
    Ok(out)
}

fn rank_host(b: &Bundle) -> RankHost {
    let layout = b.environment.rank.clone().unwrap_or_default();
    RankHost {
        rank: layout.rank,
        layout,
        host: b.environment.host.clone(),
        bundle_id: Some(b.id.clone()),
        status: match (&b.status.state, &b.status.message) {
            (RunState::Complete, None) => None,
            (state, message) => Some(format!(
                "{state:?}{}",
                message
                    .as_deref()
                    .map_or(String::new(), |m| format!(": {m}"))
            )),
        },
    }
}

/// Complete only when every rank completed; else Partial naming the ranks.
fn merged_status(statuses: &[(u32, RunStatus)]) -> RunStatus {
    let not_done: Vec<u32> = statuses
        .iter()
        .filter(|(_, s)| s.state != RunState::Complete)
        .map(|(r, _)| *r)
        .collect();
    let messages: Vec<String> = statuses
        .iter()
        .filter_map(|(r, s)| s.message.as_ref().map(|m| format!("rank {r}: {m}")))
        .collect();
    if not_done.is_empty() {
        RunStatus {
            state: RunState::Complete,
            message: (!messages.is_empty()).then(|| messages.join("; ")),
        }
    } else {
        let mut m = format!("rank(s) {} did not complete", list(&not_done));
        if !messages.is_empty() {
            m.push_str(&format!(" ({})", messages.join("; ")));
        }
        RunStatus {
            state: RunState::Partial,
            message: Some(m),
        }
    }
}

#[cfg(test)]
mod tests;
