//! How long reading a large bundle takes, and what the straight typed
//! decode saves over the located one: a generated merged bundle of 1,024
//! ranks (two epochs each, diagnostic runs of 300 steps with comm, compact
//! JSON as `stallscope merge` writes it) read by `parse_bundle` (typed
//! first, located on failure) and by `parse_bundle_located` (through a
//! `Value`, every problem with its path), and validated, interleaved in one
//! process for several rounds (the order rotated each round); prints the
//! medians and the ratio.
//!
//! `cargo xtask bench decode [-- ROUNDS]` (default 9 rounds).

#[path = "../tests/generated/mod.rs"]
mod generated;

use std::time::Instant;

use generated::{Gen, Plan, Slow, merged_bundle, ranked_runs};
use stallscope_bundle::analysis::median;
use stallscope_bundle::{
    Configuration, Engine, parse_bundle, parse_bundle_located, read_bundle, validate,
};

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(9)
        .max(3);
    let mut g = Gen(0xDEC0_DE00);
    let plan = Plan {
        ranks: 1024,
        repeats: 1,
        epochs: 2,
        steps: 300,
        slowed: Some((700, 10_000_000, Slow::Data)),
    };
    let mut config = Configuration::new("native-w2", "native, 2 workers");
    config.engine = Some(Engine::Native);
    config.runs = ranked_runs(&mut g, &plan);
    let bundle = merged_bundle(plan.ranks, config);
    let bytes = serde_json::to_vec(&bundle).expect("a bundle serialises");
    let back = read_bundle(&bytes).unwrap_or_else(|e| panic!("the generated bundle: {e}"));
    assert_eq!(back, bundle, "the generated bundle reads back equal");
    println!(
        "bench decode: a merged bundle of {} ranks × {} epochs × {} steps, {:.1} MB compact; \
         {rounds} rounds",
        plan.ranks,
        plan.epochs,
        plan.steps,
        bytes.len() as f64 / 1e6
    );
    let names = [
        "parse_bundle (typed first)",
        "parse_bundle_located",
        "validate",
    ];
    let mut times: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        for k in 0..3 {
            let which = (k + round) % 3;
            let t = Instant::now();
            match which {
                0 => drop(std::hint::black_box(parse_bundle(&bytes).expect("reads"))),
                1 => drop(std::hint::black_box(
                    parse_bundle_located(&bytes).expect("reads"),
                )),
                _ => assert!(std::hint::black_box(validate(&back)).is_empty()),
            }
            times[which].push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let mut medians = [0.0; 3];
    for (k, name) in names.iter().enumerate() {
        let v = &times[k];
        medians[k] = median(v).expect("3 rounds or more");
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        println!("  {name:<28} {:>8.1} ms  [{lo:.1}–{hi:.1}]", medians[k]);
    }
    println!(
        "  located ÷ typed decode: {:.2}× (ratio of the medians)",
        medians[1] / medians[0]
    );
    println!(
        "  read_bundle = typed decode + validate: {:.1} ms",
        medians[0] + medians[2]
    );
}
