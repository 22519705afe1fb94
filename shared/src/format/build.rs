//! Constructors of the format structs, so that adding a field touches this
//! file instead of every struct literal in the workspace (`Configuration` is
//! `#[non_exhaustive]`: outside this crate it is built only here).

use std::collections::BTreeMap;

use crate::format::{
    Configuration, DeviceInfo, DeviceKind, Engine, Experiment, ExperimentKind, Failure, ParamValue,
    Phase, Run, TimingMode, WholeRun,
};

/// What an absent `engine` means.
static NATIVE: Engine = Engine::Native;

impl DeviceInfo {
    /// A device of `kind` called `name`, nothing else known yet.
    pub fn new(kind: DeviceKind, name: impl Into<String>) -> Self {
        DeviceInfo {
            kind,
            name: name.into(),
            index: None,
            memory_total_bytes: None,
            driver: None,
            cuda_runtime: None,
            compute_capability: None,
            backend: None,
            device_type: None,
        }
    }
}

impl Configuration {
    /// A configuration with no parameters, runs or failure yet.
    pub fn new(id: impl Into<String>, label: impl Into<String>) -> Self {
        Configuration {
            id: id.into(),
            label: label.into(),
            params: BTreeMap::new(),
            not_applicable: BTreeMap::new(),
            batch_bytes: None,
            engine: None,
            runs: Vec::new(),
            failure: None,
            ranks: None,
            forecast: None,
        }
    }

    /// Set one parameter (a swept knob's value).
    pub fn with_param(mut self, name: impl Into<String>, value: impl Into<ParamValue>) -> Self {
        self.params.insert(name.into(), value.into());
        self
    }

    /// Set every parameter of `params`.
    pub fn with_params<K: Into<String>, V: Into<ParamValue>>(
        mut self,
        params: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.params
            .extend(params.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Mark a swept knob as not applying here, with the reason.
    pub fn with_not_applicable(
        mut self,
        name: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        self.not_applicable.insert(name.into(), reason.into());
        self
    }

    pub fn with_batch_bytes(mut self, bytes: u64) -> Self {
        self.batch_bytes = Some(bytes);
        self
    }

    pub fn with_engine(mut self, engine: Engine) -> Self {
        self.engine = Some(engine);
        self
    }

    pub fn with_runs(mut self, runs: Vec<Run>) -> Self {
        self.runs = runs;
        self
    }

    pub fn with_failure(mut self, failure: Failure) -> Self {
        self.failure = Some(failure);
        self
    }

    /// The engine, an absent one read as [`Engine::Native`] (format 1.0
    /// bundles were all written by the native runner).
    pub fn engine_or_native(&self) -> &Engine {
        self.engine.as_ref().unwrap_or(&NATIVE)
    }
}

impl Experiment {
    /// An experiment with nothing swept, no settings and no configurations yet.
    pub fn new(id: impl Into<String>, kind: ExperimentKind, title: impl Into<String>) -> Self {
        Experiment {
            id: id.into(),
            kind,
            title: title.into(),
            description: None,
            swept: Vec::new(),
            settings: BTreeMap::new(),
            baseline: None,
            noise_floor: None,
            not_applicable: None,
            configurations: Vec::new(),
        }
    }

    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The swept parameters, the x axis first.
    pub fn with_swept<S: Into<String>>(mut self, swept: impl IntoIterator<Item = S>) -> Self {
        self.swept = swept.into_iter().map(Into::into).collect();
        self
    }

    pub fn with_setting(mut self, name: impl Into<String>, value: impl Into<ParamValue>) -> Self {
        self.settings.insert(name.into(), value.into());
        self
    }

    pub fn with_baseline(mut self, config_id: impl Into<String>) -> Self {
        self.baseline = Some(config_id.into());
        self
    }

    /// Why the experiment could not run here (it then has no configurations).
    pub fn with_not_applicable(mut self, reason: impl Into<String>) -> Self {
        self.not_applicable = Some(reason.into());
        self
    }

    pub fn with_configurations(mut self, configurations: Vec<Configuration>) -> Self {
        self.configurations = configurations;
        self
    }
}

impl Run {
    /// A run with its place (mode, repeat, epoch, phase) and no figures yet.
    pub fn new(
        id: impl Into<String>,
        timing_mode: TimingMode,
        repeat: u32,
        epoch: u32,
        phase: Phase,
    ) -> Self {
        Run {
            id: id.into(),
            timing_mode,
            repeat,
            epoch,
            phase,
            summary_of: None,
            whole_run: None,
            diagnostic: None,
            memory: None,
            loader: None,
            steps: None,
            rank: None,
            cost: None,
            timeline: None,
            job: None,
            worker_tracks: None,
        }
    }
}

impl WholeRun {
    /// A measured whole-run epoch: its time and counts, the rates derived
    /// from them (samples/s, step time when there were steps).
    pub fn measured(seconds: f64, samples: u64, steps: u64, bytes: u64) -> WholeRun {
        WholeRun {
            seconds: Some(seconds),
            samples: Some(samples),
            samples_per_s: Some(samples as f64 / seconds),
            steps: Some(steps),
            step_s: (steps > 0).then(|| seconds / steps as f64),
            bytes: Some(bytes),
        }
    }
}
