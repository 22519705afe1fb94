//! A job's bundle while its experiments run one after another (the grid,
//! the replay, the verification): each appended and run by the one driver,
//! the bundle saved after every unit, what its DataLoader really used
//! recorded, and the failures, a stop and the accelerator carried over.

use std::path::PathBuf;

use stallscope_bundle::Bundle;
use stallscope_core::{Outcome, UnitCtx, drive, drive_repeat};

use crate::unit::JobExperiment;
use crate::what_ran;

pub struct Session<'a> {
    pub bundle: Bundle,
    pub path: PathBuf,
    cx: &'a UnitCtx<'a>,
    pub failures: usize,
    pub interrupted: bool,
    /// The accelerator a unit trained on, if any.
    pub accelerator: Option<String>,
}

impl<'a> Session<'a> {
    /// The session of `bundle`, saved at once to `path`.
    pub fn new(mut bundle: Bundle, path: PathBuf, cx: &'a UnitCtx<'a>) -> Self {
        // The CPU until a unit says it trained on an accelerator, so every
        // bundle saved on the way is valid.
        bundle.environment.device = Some(what_ran::device(None));
        let s = Session {
            bundle,
            path,
            cx,
            failures: 0,
            interrupted: false,
            accelerator: None,
        };
        s.save();
        s
    }

    pub fn save(&self) {
        save(&self.path, &self.bundle);
    }

    /// Append `job`'s experiment and run every unit of it; its index, or
    /// `None` after a stop (then nothing more runs).
    pub fn drive(&mut self, job: &mut JobExperiment, repeats: u32) -> Option<usize> {
        if self.interrupted {
            return None;
        }
        self.bundle.experiments.push(job.experiment.clone());
        let units = job.experiment.configurations.len() as u64 * u64::from(repeats);
        self.cx.progress.planned(units * job.modes.len() as u64);
        let index = self.bundle.experiments.len() - 1;
        let path = self.path.clone();
        let mut save_unit = |b: &Bundle| save(&path, b);
        let outcome = drive(
            &mut self.bundle,
            index,
            job,
            repeats,
            self.cx,
            &mut save_unit,
        );
        let seen = job.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for note in what_ran::record_what_ran(&mut self.bundle.experiments[index], &seen) {
            if !self.bundle.notes.contains(&note) {
                self.bundle.notes.push(note);
            }
        }
        let limits = self.bundle.environment.limits.clone();
        what_ran::forecast_all(&mut self.bundle.experiments[index], limits.as_ref());
        if let Some(a) = job
            .accelerator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            self.bundle.environment.device = Some(what_ran::device(Some(&a)));
            self.accelerator = Some(a);
        }
        match outcome {
            Outcome::Finished { failures } => self.failures += failures,
            Outcome::Interrupted => self.interrupted = true,
        }
        self.save();
        Some(index)
    }

    /// One more repeat (`repeat`) of the configurations `only` of the
    /// experiment at `index`; false after a stop.
    pub fn drive_repeat(
        &mut self,
        job: &mut JobExperiment,
        index: usize,
        repeat: u32,
        only: &[usize],
    ) -> bool {
        self.cx
            .progress
            .planned(only.len() as u64 * job.modes.len() as u64);
        let path = self.path.clone();
        let mut save_unit = |b: &Bundle| save(&path, b);
        let outcome = drive_repeat(
            &mut self.bundle,
            index,
            job,
            repeat,
            only,
            self.cx,
            &mut save_unit,
        );
        match outcome {
            Outcome::Finished { failures } => self.failures += failures,
            Outcome::Interrupted => self.interrupted = true,
        }
        // The forecast follows the last whole-run window, this repeat's.
        let limits = self.bundle.environment.limits.clone();
        what_ran::forecast_all(&mut self.bundle.experiments[index], limits.as_ref());
        self.save();
        !self.interrupted
    }
}

fn save(path: &std::path::Path, bundle: &Bundle) {
    if let Err(e) = stallscope_core::write_atomic(path, bundle) {
        eprintln!("stallscope job: writing {}: {e}", path.display());
    }
}
