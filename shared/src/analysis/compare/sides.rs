//! Which is which in a comparison: each side's title (a job by its
//! script), when it was made, by which runner and at which commit, with a
//! flag when the runners differ (the measuring code changed between the
//! two, so a difference may come from it). Two runs of one suite look alike
//! otherwise.

use crate::analysis::your_job::bundle_title;
use crate::format::{Bundle, Provenance};

/// One side of a comparison, as a reader tells it from the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    pub title: String,
    /// `2026-12-02 17:49 UTC`, from the bundle's `created_at`.
    pub created: String,
    /// `stallscope 0.1.0`; `None` for a published table.
    pub runner: Option<String>,
    /// The runner's commit, as recorded.
    pub commit: Option<String>,
    pub published: bool,
}

/// Both sides and what sets them apart besides their figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sides {
    pub base: Side,
    pub new: Side,
    /// Lines to flag: a different runner version or commit, or one not
    /// recorded on a measured side.
    pub flags: Vec<String>,
}

/// `2026-12-02T17:49:57Z` as `2026-12-02 17:49 UTC`; anything else as written.
pub fn show_created(at: &str) -> String {
    let ok = at.len() >= 16 && at.as_bytes().get(10) == Some(&b'T');
    if ok && at.ends_with('Z') {
        format!("{} {} UTC", &at[..10], &at[11..16])
    } else {
        at.to_string()
    }
}

fn side(b: &Bundle) -> Side {
    let runner = b.environment.runner.as_ref();
    Side {
        title: bundle_title(b),
        created: show_created(&b.created_at),
        runner: runner.map(|r| format!("{} {}", r.name, r.version)),
        commit: runner.and_then(|r| r.commit.clone()),
        published: matches!(b.provenance, Provenance::Published { .. }),
    }
}

/// The sides of BASE and NEW, with their flags.
pub fn compare_sides(base: &Bundle, new: &Bundle) -> Sides {
    let (b, n) = (side(base), side(new));
    let mut flags = Vec::new();
    if !b.published && !n.published {
        if b.runner != n.runner {
            flags.push(format!(
                "Different runner versions: BASE {}, NEW {}. The measuring code may differ; a \
                 change may come from it.",
                b.runner.as_deref().unwrap_or("not recorded"),
                n.runner.as_deref().unwrap_or("not recorded")
            ));
        }
        match (&b.commit, &n.commit) {
            (Some(x), Some(y)) if x != y => flags.push(format!(
                "Different runner commits: BASE {x}, NEW {y}. The measuring code may have \
                 changed between the two; a difference may come from it, not from the job."
            )),
            (Some(_), Some(_)) => {}
            (x, y) => {
                let missing: Vec<&str> = [("BASE", x), ("NEW", y)]
                    .into_iter()
                    .filter(|(_, c)| c.is_none())
                    .map(|(s, _)| s)
                    .collect();
                flags.push(format!(
                    "The runner commit of {} is not recorded: whether the measuring code \
                     changed cannot be told.",
                    missing.join(" and ")
                ));
            }
        }
    }
    Sides {
        base: b,
        new: n,
        flags,
    }
}

impl Side {
    /// `Job: train.py · 2026-12-02 17:49 UTC · stallscope 0.1.0 at 888ca85aab5f`.
    pub fn line(&self) -> String {
        let by = match (&self.runner, &self.commit) {
            _ if self.published => "published".to_string(),
            (Some(r), Some(c)) => format!("{r} at {c}"),
            (Some(r), None) => format!("{r}, commit not recorded"),
            (None, _) => "runner not recorded".to_string(),
        };
        format!("{} · {} · {by}", self.title, self.created)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_bundle;

    const MEASURED: &str = include_str!("../../../../fixtures/measured/cpu-quickstart-quick.json");

    #[test]
    fn two_runs_of_one_suite_are_told_apart() {
        let base = read_bundle(MEASURED.as_bytes()).unwrap();
        let mut new = base.clone();
        new.created_at = "2026-12-24T08:05:00Z".into();
        let s = compare_sides(&base, &new);
        assert_ne!(s.base.line(), s.new.line());
        assert!(
            s.new.line().contains("2026-12-24 08:05 UTC"),
            "{}",
            s.new.line()
        );
        assert!(s.flags.is_empty(), "{:?}", s.flags);
        new.environment.runner.as_mut().unwrap().commit = Some("0123456789ab".into());
        let s = compare_sides(&base, &new);
        assert_eq!(s.flags.len(), 1, "{:?}", s.flags);
        assert!(
            s.flags[0].starts_with("Different runner commits"),
            "{:?}",
            s.flags
        );
        assert!(s.flags[0].contains("0123456789ab"));
        new.environment.runner.as_mut().unwrap().commit = None;
        let s = compare_sides(&base, &new);
        assert!(
            s.flags[0].contains("of NEW is not recorded"),
            "{:?}",
            s.flags
        );
    }
}
