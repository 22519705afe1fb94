//! Progress of a long command as lines on stderr: one per configuration
//! and repeat, with the time elapsed and an estimate of what is left (from
//! the mean time of the timed processes done so far over those planned).
//! Silent when stderr is not a terminal, unless asked (`--progress`).

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use stallscope_bundle::TimingMode;
use stallscope_core::Progress;

use crate::report::text;

/// Lines of progress on stderr.
pub struct Lines {
    on: bool,
    start: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    planned: u64,
    done: u64,
    /// (experiment, configuration, repeat) of the last line.
    last: Option<(String, String, u32)>,
}

impl Lines {
    /// Printing when stderr is a terminal, or when `forced`.
    pub fn new(forced: bool) -> Self {
        Lines {
            on: forced || std::io::stderr().is_terminal(),
            start: Instant::now(),
            state: Mutex::new(State::default()),
        }
    }
}

impl Progress for Lines {
    fn epoch(&self, experiment: &str, configuration: &str, repeat: u32, _: TimingMode, _: u32) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let key = (experiment.to_string(), configuration.to_string(), repeat);
        if !self.on || s.last.as_ref() == Some(&key) {
            return;
        }
        s.last = Some(key);
        let line = line(experiment, configuration, repeat, &s, self.start.elapsed());
        eprintln!("{line}");
    }

    fn epoch_done(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).done += 1;
    }

    fn planned(&self, epochs: u64) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).planned += epochs;
    }
}

/// `[3/12] job num_workers=2, repeat 2 · 1:32 elapsed, about 3:10 left`,
/// within 100 columns.
fn line(
    experiment: &str,
    configuration: &str,
    repeat: u32,
    s: &State,
    elapsed: Duration,
) -> String {
    let left = (s.done > 0 && s.planned > s.done).then(|| {
        let per = elapsed.as_secs_f64() / s.done as f64;
        Duration::from_secs_f64(per * (s.planned - s.done) as f64)
    });
    let tail = match left {
        Some(l) => format!(
            ", repeat {repeat} · {} elapsed, about {} left",
            clock(elapsed),
            clock(l)
        ),
        None => format!(", repeat {repeat} · {} elapsed", clock(elapsed)),
    };
    let head = format!("[{}/{}] ", s.done + 1, s.planned.max(s.done + 1));
    let room = text::WIDTH.saturating_sub(text::width(&head) + text::width(&tail));
    format!(
        "{head}{}{tail}",
        text::fit(&format!("{experiment} {configuration}"), room)
    )
}

/// `1:05`, or `1:02:05` past an hour.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_where_it_is_and_what_is_left_in_100_columns() {
        let s = State {
            planned: 12,
            done: 4,
            last: None,
        };
        let l = line("job", "num_workers=2", 2, &s, Duration::from_secs(80));
        assert_eq!(
            l,
            "[5/12] job num_workers=2, repeat 2 · 1:20 elapsed, about 2:40 left"
        );
        let long = "num_workers=16-persistent_workers=true-pin_memory=true-prefetch_factor=8-x";
        let l = line(
            "job-verify",
            &long.repeat(2),
            1,
            &s,
            Duration::from_secs(4000),
        );
        assert!(text::width(&l) <= text::WIDTH, "{l}");
        assert!(l.ends_with("1:06:40 elapsed, about 2:13:20 left"), "{l}");
        let first = State::default();
        assert_eq!(
            line("job", "script", 0, &first, Duration::ZERO),
            "[1/1] job script, repeat 0 · 0:00 elapsed"
        );
    }
}
