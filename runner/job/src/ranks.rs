//! A job launched under torchrun or Slurm (`stallscope job -- torchrun
//! --nproc-per-node 2 train.py`): every rank opens its own measured window,
//! and each is kept as that rank's run. At the end each rank gets its own
//! bundle of the job (`bundle.rank-R.json`, the job bundle's shape with
//! that rank's runs and layout) and the ranks one merged bundle
//! (`bundle.merged.json` and its sidecars) through `stallscope merge`'s own
//! code, so the rank analysis, the job figures and the viewer read a job's
//! ranks as they read a ranked `stallscope run`. `bundle.json` stays the
//! lowest rank's, as before.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;

use stallscope_bundle::{Bundle, Failure, RankLayout, Run, TimingMode};
use stallscope_core::ranks::{MasterFlags, from_env};

use crate::records::{self, ProcFile};

/// How a job's ranks synchronise: the script's own collectives, not ours.
pub const SYNC: &str = "the script's own (stallscope adds no barrier to a job)";

/// (experiment id, configuration id).
type Key = (String, String);

/// Every rank's runs and layout, as the units measured them.
#[derive(Default)]
pub struct RankRuns {
    inner: Mutex<Collected>,
}

#[derive(Default)]
struct Collected {
    layouts: BTreeMap<u32, RankLayout>,
    runs: HashMap<Key, BTreeMap<u32, Vec<Run>>>,
    /// Why a rank's window of a configuration did not complete.
    failures: HashMap<Key, BTreeMap<u32, String>>,
}

/// The layout a process's launcher gave it (its `hello`'s `rank_env`), or
/// `None` for one process; a malformed variable counts as none.
pub fn layout_of(f: &ProcFile) -> Option<RankLayout> {
    let hello = f.first("hello")?;
    let env = &hello["rank_env"];
    let get = |k: &str| env[k].as_str().map(str::to_owned);
    let mut layout = from_env(&get, &MasterFlags::default()).ok()??;
    layout.sync = SYNC.into();
    layout.hostname = hello["hostname"].as_str().map(str::to_owned);
    Some(layout)
}

impl RankRuns {
    /// Keep the window of every rank in `files` (one unit's process tree):
    /// its run when it completed, else the steps it measured and why it
    /// ended (`asked` steps of the DataLoader at iteration index `loader`).
    /// A tree without ranks records nothing.
    pub fn record(
        &self,
        key: Key,
        files: &[ProcFile],
        (mode, repeat): (&TimingMode, u32),
        (asked, loader): (u32, u32),
    ) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for f in files.iter().filter(|f| f.first("window").is_some()) {
            let Some(layout) = layout_of(f) else { continue };
            let rank = layout.rank;
            c.layouts.entry(rank).or_insert(layout);
            let run = match f.first("done") {
                Some(done) => Some(records::run(f, done, mode, repeat)),
                None => {
                    let why = crate::ending::ended(std::slice::from_ref(f), asked, loader)
                        .map_or_else(|| "the window did not complete".into(), |e| e.text);
                    let failures = c.failures.entry(key.clone()).or_default();
                    failures.entry(rank).or_insert(why);
                    records::partial_run(f, mode, repeat)
                }
            };
            if let Some(run) = run {
                let runs = c.runs.entry(key.clone()).or_default();
                runs.entry(rank).or_default().push(run);
            }
        }
    }

    /// The per-rank bundles of `bundle` (the lowest rank's), written beside
    /// it, and the merged one; a line saying what was written, or `None`
    /// when the job had no ranks.
    pub fn write(&self, bundle: &Bundle, dir: &Path) -> Result<Option<String>, String> {
        let c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(lowest) = c.layouts.keys().next().copied() else {
            return Ok(None);
        };
        let world = c.layouts[&lowest].world_size;
        let mut bundles = Vec::new();
        for (&rank, layout) in &c.layouts {
            let b = rank_bundle(bundle, &c, rank, rank == lowest, layout);
            let path = dir.join(format!("bundle.rank-{rank}.json"));
            stallscope_core::write_atomic(&path, &b)
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            bundles.push(b);
        }
        let measured = bundles.len();
        let out = dir.join("bundle.merged.json");
        let text = match stallscope_core::merge_into(bundles, &out) {
            Ok(_) => format!(
                "ranks: {measured} of {world} measured; per-rank bundles bundle.rank-R.json and \
                 the merged {}",
                out.display()
            ),
            // Ranks that never opened a window: the per-rank bundles stay.
            Err(e) => format!(
                "ranks: {measured} of {world} measured; per-rank bundles bundle.rank-R.json in \
                 {}; not merged: {e}",
                dir.display()
            ),
        };
        Ok(Some(text))
    }
}

/// Rank `rank`'s bundle of the job: `bundle` with that rank's layout and,
/// for every configuration, that rank's runs (the lowest rank's are the
/// bundle's own) and, where its window did not complete, why.
fn rank_bundle(bundle: &Bundle, c: &Collected, rank: u32, lowest: bool, l: &RankLayout) -> Bundle {
    let mut b = bundle.clone();
    b.id = format!("{}-rank{rank}", bundle.id);
    b.environment.rank = Some(l.clone());
    for e in &mut b.experiments {
        for conf in &mut e.configurations {
            let key = (e.id.clone(), conf.id.clone());
            if !lowest {
                conf.runs = c
                    .runs
                    .get(&key)
                    .and_then(|m| m.get(&rank))
                    .cloned()
                    .unwrap_or_default();
            }
            let why = c.failures.get(&key).and_then(|m| m.get(&rank));
            if let (None, Some(why)) = (&conf.failure, why) {
                conf.failure = Some(Failure::Error {
                    message: format!("this rank's window did not complete: {why}"),
                });
            }
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A process file holding only a `hello` with `env` as its `rank_env`.
    fn hello(env: Value) -> ProcFile {
        ProcFile {
            name: "proc-1.jsonl".into(),
            records: vec![json!({"type": "hello", "rank_env": env})],
        }
    }

    #[test]
    fn a_torchrun_rank_has_its_layout_and_one_process_none() {
        let f = hello(json!({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none"}));
        let l = layout_of(&f).expect("a rank");
        assert_eq!((l.rank, l.world_size, l.local_rank), (1, 2, 1));
        assert_eq!((l.launcher.as_str(), l.master_port), ("torchrun", 29500));
        assert_eq!(l.sync, SYNC);
        assert!(layout_of(&hello(json!({}))).is_none());
        assert!(layout_of(&hello(json!({"RANK": "0", "WORLD_SIZE": "1"}))).is_none());
        assert!(layout_of(&hello(json!({"RANK": "x", "WORLD_SIZE": "2"}))).is_none());
    }
}
