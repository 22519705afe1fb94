//! What `stallscope merge` costs at many ranks, its file reading aside: a
//! generated job of WORLD ranks (one configuration, a cold and a steady
//! epoch each timed both ways, diagnostic runs of 300 steps with comm, one
//! rank slowed in its loader), each rank's bundle as JSON bytes as the ranks
//! write them (one line; `--indented` as runners before issue 20 wrote
//! them); then, timed: reading them (`read_bundle`, on a thread per core as
//! the command does), `merge::merge`, `merge::compact_on` (the rank
//! analysis, the job runs, the sidecars encoded, on a thread per core), the
//! merged bundle written as compact JSON, and the viewer's first work on it
//! (reading the bundle, decoding the comm sidecar). Prints sizes and
//! whether the straggler table names the slowed rank first.
//!
//! `cargo bench -p stallscope-bundle --bench merge_ranks -- [WORLD] [STEPS]
//! [--indented] [--out DIR]` (default 1,024 ranks of 300 steps; `--out` also
//! writes the merged bundle and its sidecars into DIR, for the viewer).

#[path = "../tests/generated/mod.rs"]
mod generated;

use std::time::Instant;

use generated::{Gen, Plan, Slow, layout, merged_bundle, ranked_runs};
use stallscope_bundle::analysis::{pooled_runs, rank_analysis_in};
use stallscope_bundle::merge::{Compacted, compact_on, merge};
use stallscope_bundle::sidecar::decode_for;
use stallscope_bundle::{Bundle, Configuration, Run, read_bundle};

fn arg(k: usize, default: u64) -> u64 {
    std::env::args()
        .skip(1)
        .filter(|a| a.parse::<u64>().is_ok())
        .nth(k)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// The folder after `--out`, when given.
fn out_dir() -> Option<std::path::PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--out")?;
    args.get(at + 1).map(Into::into)
}

/// The merged bundle (`bundle.merged.json`) and its sidecars, into `dir`.
fn write_out(dir: &std::path::Path, json: &[u8], sidecars: &[(String, Vec<u8>)]) {
    std::fs::create_dir_all(dir).expect("the output folder");
    std::fs::write(dir.join("bundle.merged.json"), json).expect("the merged bundle");
    for (name, bytes) in sidecars {
        std::fs::write(dir.join(name), bytes).expect("a sidecar");
    }
    println!("  written to {}", dir.display());
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Every rank's bundle, as JSON: one line, or indented.
fn rank_files(world: u32, steps: usize, slow: u32, indented: bool) -> Vec<Vec<u8>> {
    let mut g = Gen(0x5EED_1638);
    let plan = Plan {
        ranks: world,
        repeats: 1,
        epochs: 2,
        steps,
        slowed: Some((slow, 6_000_000, Slow::Data)),
    };
    let mut by_rank: Vec<Vec<Run>> = vec![Vec::new(); world as usize];
    for mut r in ranked_runs(&mut g, &plan) {
        let k = r.rank.take().unwrap_or(0) as usize;
        by_rank[k].push(r);
    }
    by_rank
        .into_iter()
        .enumerate()
        .map(|(k, runs)| {
            let c = Configuration::new("w2", "2 workers")
                .with_param("workers", 2)
                .with_runs(runs);
            let mut b = merged_bundle(1, c);
            b.ranks.clear();
            b.id = "bench".into();
            b.environment.rank = Some(layout(k as u32, world));
            if indented {
                b.to_json_pretty().into_bytes()
            } else {
                serde_json::to_vec(&b).expect("a bundle serializes")
            }
        })
        .collect()
}

/// `read_bundle` of every file on a thread per core, each taking the next
/// file not yet taken, as `stallscope merge` reads them.
fn read_all(files: &[Vec<u8>]) -> Vec<Bundle> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let mut read: Vec<(usize, Bundle)> = std::thread::scope(|s| {
        let parts: Vec<_> = (0..cores())
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break mine };
                        mine.push((i, read_bundle(f).expect("a generated bundle reads")));
                    }
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().expect("a reading thread"))
            .collect()
    });
    read.sort_by_key(|(i, _)| *i);
    read.into_iter().map(|(_, b)| b).collect()
}

fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

fn main() {
    let world = arg(0, 1024) as u32;
    let steps = arg(1, 300) as usize;
    let slow = world * 2 / 3;
    let t = Instant::now();
    let indented = flag("--indented");
    let files = rank_files(world, steps, slow, indented);
    let bytes: usize = files.iter().map(Vec::len).sum();
    println!(
        "merge_ranks: {world} rank bundles of {steps} steps, {:.1} MB of {} JSON, made in {:.1} s",
        bytes as f64 / 1e6,
        if indented { "indented" } else { "one-line" },
        secs(t)
    );
    let t0 = Instant::now();
    let bundles = read_all(&files);
    drop(files);
    let read = secs(t0);
    let t = Instant::now();
    let merged = merge(bundles).expect("the ranks merge");
    let merging = secs(t);
    let c = &merged.experiments[0].configurations[0];
    let t = Instant::now();
    std::hint::black_box(rank_analysis_in(&merged, c));
    let analysis = secs(t);
    let t = Instant::now();
    std::hint::black_box(pooled_runs(c, Some(world)));
    let jobs = secs(t);
    println!("  of compact: the rank analysis {analysis:.2} s, the job runs {jobs:.2} s");
    let t = Instant::now();
    let Compacted { bundle, sidecars } = compact_on(merged, cores());
    let compacting = secs(t);
    let t = Instant::now();
    let json = serde_json::to_vec(&bundle).expect("a bundle serializes");
    let writing = secs(t);
    let total = secs(t0);
    let side: usize = sidecars.iter().map(|s| s.1.len()).sum();
    println!(
        "  read (read_bundle, {n} threads) {read:.2} s, merge {merging:.2} s, compact ({n} threads) \
         {compacting:.2} s, JSON {writing:.2} s: {total:.2} s in all",
        n = cores()
    );
    println!(
        "  merged bundle {:.2} MB (format {}), {} sidecar files {:.1} MB",
        json.len() as f64 / 1e6,
        bundle.schema_version,
        sidecars.len(),
        side as f64 / 1e6
    );
    if let Some(dir) = out_dir() {
        write_out(&dir, &json, &sidecars);
    }
    let t = Instant::now();
    let again = read_bundle(&json).expect("the merged bundle reads");
    let reread = secs(t);
    let c = &again.experiments[0].configurations[0];
    let record = c
        .ranks
        .as_ref()
        .unwrap()
        .sidecars
        .iter()
        .find(|s| s.stage == "comm")
        .unwrap();
    let file = &sidecars.iter().find(|s| s.0 == record.file).unwrap().1;
    let t = Instant::now();
    let steps = decode_for(file, record, &again.id).expect("the comm sidecar decodes");
    let decoding = secs(t);
    println!(
        "  viewer side: read_bundle of the merged bundle {:.0} ms; decode of the comm sidecar ({:.1} MB, {} ranks) {:.0} ms",
        reread * 1e3,
        file.len() as f64 / 1e6,
        steps.runs[0].ranks.len(),
        decoding * 1e3
    );
    let a = rank_analysis_in(&again, c).expect("a rank analysis");
    let first = a.stragglers.first().map(|s| s.0);
    println!(
        "  straggler table names rank {} first (the slowed rank is {slow}): {}",
        first.map_or("none".into(), |r| r.to_string()),
        if first == Some(slow) { "ok" } else { "WRONG" }
    );
}
