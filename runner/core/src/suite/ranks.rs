//! The suite's rank knobs (top level): how long a rank waits at the
//! per-step barrier (`rank_timeout_s`) and one rank slowed on purpose
//! (`slow_rank` with `slow_rank_delay_ms`, a delay added to every batch that
//! rank's loop takes), with located errors.

use super::located::{Located, SuiteError};
use super::raw::RawSuite;

/// The barrier timeout when the suite sets none (c10d's 30 minutes is too
/// long to notice a dead rank).
pub const DEFAULT_RANK_TIMEOUT_S: f64 = 300.0;

/// What a suite says about ranks (ignored by a run of one process).
#[derive(Debug, Clone, PartialEq)]
pub struct RankKnobs {
    /// Seconds a rank waits at a barrier (and for the master) before it
    /// records a comm timeout.
    pub timeout_s: f64,
    /// The rank slowed on purpose, and by how much per batch.
    pub slow: Option<SlowRank>,
}

/// `slow_rank` + `slow_rank_delay_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowRank {
    pub rank: u32,
    pub delay_ms: f64,
}

impl Default for RankKnobs {
    fn default() -> Self {
        RankKnobs {
            timeout_s: DEFAULT_RANK_TIMEOUT_S,
            slow: None,
        }
    }
}

pub(crate) fn parse(raw: &RawSuite, cx: &Located) -> Result<RankKnobs, SuiteError> {
    let timeout_s = match &raw.rank_timeout_s {
        None => DEFAULT_RANK_TIMEOUT_S,
        Some(v) => {
            let x = *v.get_ref();
            if !(x.is_finite() && (0.1..=86_400.0).contains(&x)) {
                return Err(cx.err(
                    v.span(),
                    "rank_timeout_s",
                    format!("{x} is out of range; expected 0.1 to 86400 seconds"),
                ));
            }
            x
        }
    };
    let slow = match (&raw.slow_rank, &raw.slow_rank_delay_ms) {
        (None, None) => None,
        (Some(r), None) => {
            return Err(cx.err(
                r.span(),
                "slow_rank",
                "set without slow_rank_delay_ms; expected both (e.g. slow_rank = 1 and \
                 slow_rank_delay_ms = 20)",
            ));
        }
        (None, Some(d)) => {
            return Err(cx.err(
                d.span(),
                "slow_rank_delay_ms",
                "set without slow_rank; expected the rank to slow as well (e.g. slow_rank = 1)",
            ));
        }
        (Some(r), Some(d)) => {
            let rank = cx.int(&Some(r.clone()), "slow_rank", 0, 0, 65_535)? as u32;
            let ms = *d.get_ref();
            if !(ms.is_finite() && (0.0..=60_000.0).contains(&ms)) {
                return Err(cx.err(
                    d.span(),
                    "slow_rank_delay_ms",
                    format!("{ms} is out of range; expected 0 to 60000 milliseconds per batch"),
                ));
            }
            Some(SlowRank { rank, delay_ms: ms })
        }
    };
    Ok(RankKnobs { timeout_s, slow })
}

#[cfg(test)]
mod tests {
    use crate::suite::parse_suite;

    const TAIL: &str = "[[experiment]]\nid = \"a\"\nkind = \"compute\"\n";

    fn err(head: &str) -> String {
        parse_suite(&format!("{head}{TAIL}"), "s.toml", "s", None, false)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn knobs_are_read_with_defaults() {
        let p = parse_suite(TAIL, "s.toml", "s", None, false).unwrap();
        assert_eq!(p.ranks, super::RankKnobs::default());
        let text = format!("rank_timeout_s = 5\nslow_rank = 1\nslow_rank_delay_ms = 20\n{TAIL}");
        let p = parse_suite(&text, "s.toml", "s", None, false).unwrap();
        assert_eq!(p.ranks.timeout_s, 5.0);
        let slow = p.ranks.slow.unwrap();
        assert_eq!((slow.rank, slow.delay_ms), (1, 20.0));
    }

    #[test]
    fn bad_values_are_located() {
        assert_eq!(
            err("rank_timeout_s = 0.0\n"),
            "s.toml:1:18: rank_timeout_s: 0 is out of range; expected 0.1 to 86400 seconds"
        );
        assert!(err("slow_rank = 1\n").starts_with("s.toml:1:13: slow_rank: set without"));
        assert!(err("slow_rank_delay_ms = 3.0\n").starts_with("s.toml:1:22: slow_rank_delay_ms:"));
        assert!(
            err("slow_rank = -1\nslow_rank_delay_ms = 3.0\n")
                .starts_with("s.toml:1:13: slow_rank: -1 is out of range")
        );
        assert!(
            err("slow_rank = 0\nslow_rank_delay_ms = -3.0\n")
                .starts_with("s.toml:2:22: slow_rank_delay_ms: -3 is out of range")
        );
    }
}
