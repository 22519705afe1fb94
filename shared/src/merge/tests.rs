//! Tests of the merge: generated rank sets (worlds, orders, failures,
//! statuses) keep every run once with its rank, and bad sets are refused
//! naming the bundle.

use super::*;
use crate::format::{RankLayout, SuiteRecord};

const FIXTURE: &str = include_str!("../../../fixtures/measured/cpu-quickstart-quick.json");

/// SplitMix64, for generated cases (no dependency).
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn rank_bundle(rank: u32, world: u32) -> Bundle {
    let mut b = crate::read_bundle(FIXTURE.as_bytes()).expect("fixture reads");
    b.id = format!("b{rank}");
    b.environment.rank = Some(RankLayout {
        launcher: "torchrun".into(),
        rank,
        world_size: world,
        local_rank: rank,
        master_addr: "127.0.0.1".into(),
        master_port: 29500,
        sync: "tcpstore_barrier".into(),
        ..RankLayout::default()
    });
    b
}

fn runs(b: &Bundle) -> usize {
    b.experiments
        .iter()
        .flat_map(|e| &e.configurations)
        .map(|c| c.runs.len())
        .sum()
}

#[test]
fn generated_rank_sets_merge_with_every_run_once() {
    let mut g = Gen(7);
    for case in 0..60 {
        let world = 1 + g.below(6) as u32;
        let mut bundles: Vec<Bundle> = (0..world).map(|r| rank_bundle(r, world)).collect();
        // Failures on some ranks' configurations; some ranks not complete.
        let mut failed_by: HashMap<(usize, usize), u32> = HashMap::new();
        for (r, b) in bundles.iter_mut().enumerate() {
            for (ei, e) in b.experiments.iter_mut().enumerate() {
                for (ci, c) in e.configurations.iter_mut().enumerate() {
                    if g.below(4) == 0 {
                        c.runs.truncate(g.below(3) as usize);
                        c.failure = Some(Failure::Error {
                            message: format!("boom {r}"),
                        });
                        failed_by.entry((ei, ci)).or_insert(r as u32);
                    }
                }
            }
            if g.below(5) == 0 {
                b.status.state = RunState::Partial;
            }
        }
        let complete = bundles.iter().all(|b| b.status.state == RunState::Complete);
        let total: usize = bundles.iter().map(runs).sum();
        // Any order.
        for i in (1..bundles.len()).rev() {
            bundles.swap(i, g.below(i as u64 + 1) as usize);
        }
        let merged = merge(bundles).unwrap();
        assert_eq!(runs(&merged), total, "case {case}");
        let ranks: Vec<u32> = merged.ranks.iter().map(|h| h.rank).collect();
        assert_eq!(ranks, (0..world).collect::<Vec<_>>());
        for h in &merged.ranks {
            assert_eq!(
                h.bundle_id.as_deref(),
                Some(format!("b{}", h.rank).as_str())
            );
        }
        for (ei, e) in merged.experiments.iter().enumerate() {
            for (ci, c) in e.configurations.iter().enumerate() {
                for r in &c.runs {
                    let rank = r.rank.expect("every run has its rank");
                    assert!(r.id.starts_with(&format!("rank{rank}-")), "{}", r.id);
                }
                match failed_by.get(&(ei, ci)) {
                    Some(r) => {
                        let Some(Failure::Error { message }) = &c.failure else {
                            panic!("case {case}: {:?}", c.failure)
                        };
                        assert_eq!(message, &format!("rank {r}: boom {r}"));
                    }
                    None => assert!(c.failure.is_none()),
                }
            }
        }
        assert_eq!(
            merged.status.state == RunState::Complete,
            complete,
            "case {case}"
        );
        let problems = crate::validate(&merged);
        assert!(problems.is_empty(), "case {case}: {problems:?}");
    }
}

#[test]
fn a_partial_status_names_the_ranks() {
    let mut b1 = rank_bundle(1, 3);
    b1.status = RunStatus {
        state: RunState::Partial,
        message: Some("stopped".into()),
    };
    let m = merge(vec![rank_bundle(0, 3), b1, rank_bundle(2, 3)]).unwrap();
    assert_eq!(m.status.state, RunState::Partial);
    assert_eq!(
        m.status.message.as_deref(),
        Some("rank(s) 1 did not complete (rank 1: stopped)")
    );
    assert_eq!(m.ranks[1].status.as_deref(), Some("Partial: stopped"));
}

#[test]
fn bad_rank_sets_are_refused_naming_the_bundle() {
    assert_eq!(merge(Vec::new()).unwrap_err(), MergeError::Empty);
    let e = merge(vec![rank_bundle(0, 2), rank_bundle(0, 2)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bundles b0 and b0 are both rank 0; expected one bundle per rank"
    );
    let e = merge(vec![rank_bundle(0, 3), rank_bundle(2, 3)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no bundle for rank(s) 1; expected one for each of the 3 ranks"
    );
    let e = merge(vec![rank_bundle(0, 2), rank_bundle(1, 4)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bundle b1 (rank 1) has world size 4; expected 2 as bundle b0 (rank 0) has"
    );
    let mut other = rank_bundle(1, 2);
    other.environment.suite = Some(SuiteRecord {
        name: "other".into(),
        path: None,
        toml: String::new(),
    });
    let e = merge(vec![rank_bundle(0, 2), other]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("bundle b1 (rank 1) ran suite \"other\""),
        "{e}"
    );
    assert_eq!(e.bundles(), vec!["b1", "b0"]);
    let mut plain = rank_bundle(0, 1);
    plain.environment.rank = None;
    let e = merge(vec![plain]).unwrap_err();
    assert_eq!(
        e,
        MergeError::NotRanked {
            bundle: "b0".into()
        }
    );
}
