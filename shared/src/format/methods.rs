//! Methods of the format types: the names as written in the format, the
//! conversions into [`ParamValue`], and look-ups by id.

use crate::format::*;

impl SchemaVersion {
    /// The version this build writes.
    pub const CURRENT: SchemaVersion = SchemaVersion {
        major: FORMAT_MAJOR,
        minor: FORMAT_MINOR,
    };
}

impl std::fmt::Display for SchemaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl TimingMode {
    /// The name used in the format and in tables.
    pub fn as_str(&self) -> &str {
        match self {
            TimingMode::WholeRun => "whole_run",
            TimingMode::Diagnostic => "diagnostic",
            TimingMode::Unknown(name) => name,
        }
    }
    /// A short label for people.
    pub fn label(&self) -> &str {
        match self {
            TimingMode::WholeRun => "whole-run",
            TimingMode::Diagnostic => "diagnostic — synchronized at every stage",
            TimingMode::Unknown(name) => name,
        }
    }
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Cold => "cold",
            Phase::Steady => "steady",
        }
    }
}

impl ExperimentKind {
    pub fn as_str(&self) -> &str {
        match self {
            ExperimentKind::Loader => "loader",
            ExperimentKind::Transfer => "transfer",
            ExperimentKind::Compute => "compute",
            ExperimentKind::BatchSweep => "batch_sweep",
            ExperimentKind::OomProbe => "oom_probe",
            ExperimentKind::Stall => "stall",
            ExperimentKind::Unknown(name) => name,
        }
    }
}

impl Engine {
    pub fn as_str(&self) -> &str {
        match self {
            Engine::Native => "native",
            Engine::Pytorch => "pytorch",
            Engine::Spdl => "spdl",
            Engine::Dali => "dali",
            Engine::Nodes => "nodes",
            Engine::Unknown(name) => name,
        }
    }
}

impl Failure {
    /// The `kind` as written in the format.
    pub fn kind(&self) -> &str {
        match self {
            Failure::OutOfMemory(_) => "out_of_memory",
            Failure::WorkerError { .. } => "worker_error",
            Failure::Panic { .. } => "panic",
            Failure::Interrupted { .. } => "interrupted",
            Failure::Error { .. } => "error",
            Failure::CommTimeout { .. } => "comm_timeout",
            Failure::WouldNotFit { .. } => "would_not_fit",
            Failure::Crashed { .. } => "crashed",
            Failure::Script { .. } => "script",
            Failure::Unknown { kind, .. } => kind,
        }
    }
}

impl Resource {
    pub fn as_str(&self) -> &str {
        match self {
            Resource::SharedMemory => "shared_memory",
            Resource::Memory => "memory",
            Resource::Unknown(name) => name,
        }
    }
    /// What it is, for people.
    pub fn label(&self) -> &str {
        match self {
            Resource::SharedMemory => "shared memory (/dev/shm)",
            Resource::Memory => "memory",
            Resource::Unknown(name) => name,
        }
    }
}

impl CrashCause {
    pub fn as_str(&self) -> &str {
        match self {
            CrashCause::SharedMemory => "shared_memory",
            CrashCause::WorkerSignal => "worker_signal",
            CrashCause::OomKilled => "oom_killed",
            CrashCause::NoSpace => "no_space",
            CrashCause::Other => "other",
            CrashCause::Unknown(name) => name,
        }
    }
    /// What it is, for people.
    pub fn label(&self) -> &str {
        match self {
            CrashCause::SharedMemory => "shared memory exhausted",
            CrashCause::WorkerSignal => "a worker was killed",
            CrashCause::OomKilled => "out of memory (or most likely so)",
            CrashCause::NoSpace => "no space left on device",
            CrashCause::Other => "crashed",
            CrashCause::Unknown(name) => name,
        }
    }
}

impl DeviceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
            DeviceKind::Wgpu => "wgpu",
        }
    }
}

impl ParamValue {
    /// The value as a number, when it is one (for axes and sorting).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Int(i) => Some(*i as f64),
            ParamValue::Float(f) => Some(*f),
            _ => None,
        }
    }
}

impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Text(s) => f.write_str(s),
        }
    }
}

impl From<i64> for ParamValue {
    fn from(v: i64) -> Self {
        ParamValue::Int(v)
    }
}
impl From<i32> for ParamValue {
    fn from(v: i32) -> Self {
        ParamValue::Int(v.into())
    }
}
impl From<u32> for ParamValue {
    fn from(v: u32) -> Self {
        ParamValue::Int(v as i64)
    }
}
impl From<usize> for ParamValue {
    fn from(v: usize) -> Self {
        ParamValue::Int(v as i64)
    }
}
impl From<f64> for ParamValue {
    fn from(v: f64) -> Self {
        ParamValue::Float(v)
    }
}
impl From<bool> for ParamValue {
    fn from(v: bool) -> Self {
        ParamValue::Bool(v)
    }
}
impl From<&str> for ParamValue {
    fn from(v: &str) -> Self {
        ParamValue::Text(v.to_string())
    }
}
impl From<String> for ParamValue {
    fn from(v: String) -> Self {
        ParamValue::Text(v)
    }
}

impl Bundle {
    /// Whether the figures were measured (not transcribed).
    pub fn is_measured(&self) -> bool {
        matches!(self.provenance, Provenance::Measured)
    }

    /// Serialize as pretty JSON (what the runner writes).
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("bundle types always serialize")
    }

    /// Find an experiment by id.
    pub fn experiment(&self, id: &str) -> Option<&Experiment> {
        self.experiments.iter().find(|e| e.id == id)
    }
}

impl Run {
    /// Samples per second of a whole-run run (the stored figure).
    pub fn whole_run_samples_per_s(&self) -> Option<f64> {
        self.whole_run.as_ref()?.samples_per_s
    }
}

impl Experiment {
    pub fn configuration(&self, id: &str) -> Option<&Configuration> {
        self.configurations.iter().find(|c| c.id == id)
    }
}

impl Configuration {
    /// Why this configuration could not run on the machine that measured
    /// it, as recorded: its engine is not applicable there (its package not
    /// installed, no Python), or DALI's decoder placement is (`mixed`
    /// without a GPU). A knob that is not applicable elsewhere only means
    /// nothing for a configuration that still runs.
    pub fn cannot_run_here(&self) -> Option<&str> {
        let na = |k: &str| self.not_applicable.get(k).map(String::as_str);
        let dali = self.engine == Some(Engine::Dali);
        na("engine").or(na("dali_device").filter(|_| dali))
    }
}
