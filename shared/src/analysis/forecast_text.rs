//! The memory forecast of the configuration a job's closing recommends (or
//! of your settings, when nothing is recommended), as one closing line:
//! whether it fits the machine's limits, each worker's memory by the
//! epoch's end with its basis, and copy-on-read's fixes where it shows.

use crate::analysis::crashed::fallback_pick;
use crate::analysis::tune::tune_choice;
use crate::analysis::your_job::JOB_SCRIPT_ID;
use crate::format::Experiment;

/// The configuration the closing speaks for: `--tune`'s pick (your
/// settings when it keeps them), the crash search's, else your settings.
fn spoken_for(e: &Experiment) -> Option<String> {
    if e.settings.contains_key("tune_grid") {
        if let Some(c) = tune_choice(e, JOB_SCRIPT_ID, &[]) {
            return Some(c.chosen.id);
        }
        if let Some(c) = fallback_pick(e) {
            return Some(c.id.clone());
        }
    }
    Some(JOB_SCRIPT_ID.to_string())
}

/// `Memory forecast (num_workers=2): fits: ...; workers reach ~... each by
/// the epoch's end: ... .`; `None` when that configuration has none.
pub fn forecast_line(e: &Experiment) -> Option<String> {
    let id = spoken_for(e)?;
    let c = e.configuration(&id)?;
    let f = c.forecast.as_ref()?;
    let who = if id == JOB_SCRIPT_ID {
        "your settings".to_string()
    } else {
        c.label.clone()
    };
    let mut parts = vec![f.verdict.clone()];
    parts.extend(f.worker_epoch_end.as_ref().map(|w| w.basis.clone()));
    parts.extend(f.worker_across_epochs.as_ref().map(|w| w.basis.clone()));
    let mut line = format!("Memory forecast ({who}): {}.", parts.join("; "));
    if let Some(cor) = &f.copy_on_read {
        line += &format!(" {}.", upper_first(&cor.advice));
    }
    Some(line)
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::forecast::forecast;
    use crate::format::{Configuration, ExperimentKind, ForecastInputs, HostLimits, WorkerWindow};

    const MIB: u64 = 1024 * 1024;

    /// Your settings: two forked workers growing 610 KiB per sample read
    /// of a 10,000-sample dataset, under a 2 GiB limit.
    fn job() -> Experiment {
        let inputs = ForecastInputs {
            workers: 2,
            prefetch_factor: Some(2),
            batch_bytes: Some(MIB),
            start_method: Some("fork".into()),
            shuffle: Some(false),
            dataset_len: Some(10_000),
            samples_before_window: 320,
            samples_in_window: 640,
            main_rss_bytes: Some(500 * MIB),
            workers_uss: (0..2)
                .map(|w| WorkerWindow {
                    worker_id: w,
                    uss_at_open_bytes: 100 * MIB,
                    uss_bytes: 100 * MIB + 320 * 610 * 1024,
                })
                .collect(),
            ..ForecastInputs::default()
        };
        let limits = HostLimits {
            usable_cpus: 2,
            shm_total_bytes: Some(64 * MIB),
            shm_free_bytes: Some(64 * MIB),
            memory_limit_bytes: Some(2048 * MIB),
            memory_limit_source: Some("/sys/fs/cgroup/memory.max".into()),
            ..HostLimits::default()
        };
        let mut own = Configuration::new(JOB_SCRIPT_ID, "the script's own settings");
        own.forecast = Some(forecast(&inputs, Some(&limits)));
        Experiment::new("job", ExperimentKind::Loader, "job").with_configurations(vec![own])
    }

    #[test]
    fn the_closing_says_what_the_window_forecasts_and_why() {
        let line = forecast_line(&job()).expect("a forecast line");
        assert!(
            line.starts_with("Memory forecast (your settings): would not fit: "),
            "{line}"
        );
        assert!(line.contains("the 2.00 GiB memory limit"), "{line}");
        assert!(line.contains("per sample read, copy-on-read"), "{line}");
        assert!(
            line.contains("Copy-on-read: keep the samples in NumPy arrays"),
            "{line}"
        );
        let mut none = job();
        none.configurations[0].forecast = None;
        assert_eq!(forecast_line(&none), None);
    }
}
