//! The validated plan: what `stallscope run` executes. Built only by the
//! parsers of this module, so every value here has passed its checks.

use std::path::PathBuf;

use crate::model_spec::ModelSpec;
use stallscope_loader::{JpegDecoder, OnBadSample, WorkerKind};

/// A validated suite: what `stallscope run` executes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub title: String,
    pub path: Option<PathBuf>,
    /// The TOML text as read (recorded in the bundle).
    pub toml: String,
    pub seed: u64,
    pub data_seed: u64,
    /// libtorch's intra-op thread count for the whole run (seeds/000 used 1);
    /// `None` leaves libtorch's default.
    pub torch_threads: Option<i32>,
    /// The barrier timeout and the rank slowed on purpose (ranked runs).
    pub ranks: super::ranks::RankKnobs,
    pub experiments: Vec<ExperimentPlan>,
}

/// One experiment of a plan.
#[derive(Debug, Clone)]
pub struct ExperimentPlan {
    pub id: String,
    pub title: Option<String>,
    pub repeats: u32,
    pub epochs: u32,
    pub spec: ExperimentSpec,
}

/// Data an experiment trains on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataSpec {
    /// FashionMNIST (IDX from `--data-dir`, else synthetic), first `samples`.
    FashionMnist { samples: usize },
    /// seeds/000 tensors generated in memory.
    Tensor {
        samples: usize,
        features: usize,
        classes: usize,
    },
}

impl ExperimentSpec {
    /// The bundle's kind of this experiment.
    pub fn kind(&self) -> stallscope_bundle::ExperimentKind {
        use stallscope_bundle::ExperimentKind as K;
        match self {
            ExperimentSpec::Compute { .. } => K::Compute,
            ExperimentSpec::Transfer { .. } => K::Transfer,
            ExperimentSpec::BatchSweep { .. } => K::BatchSweep,
            ExperimentSpec::OomProbe { .. } => K::OomProbe,
            ExperimentSpec::Loader(_) => K::Loader,
            ExperimentSpec::Stall(_) => K::Stall,
        }
    }
}

/// What an experiment measures, with its grid.
#[derive(Debug, Clone, PartialEq)]
pub enum ExperimentSpec {
    Compute {
        model: ModelSpec,
        batch_sizes: Vec<i64>,
        steps: u32,
    },
    Transfer {
        sizes_bytes: Vec<u64>,
        copies: u32,
        pinned: Vec<bool>,
        non_blocking: Vec<bool>,
    },
    BatchSweep {
        model: ModelSpec,
        data: DataSpec,
        batch_sizes: Vec<i64>,
    },
    OomProbe {
        model: ModelSpec,
        memory_fraction: f64,
        start_batch: i64,
        max_batch: i64,
    },
    /// Loader knobs swept (`[experiment.loader]`).
    Loader(LoaderPlan),
    /// Differential stall attribution for one loader configuration.
    Stall(LoaderPlan),
}

/// Where the samples come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataPlan {
    /// seeds/000 tensors generated in memory (features and classes of the
    /// linear model).
    Tensor { samples: usize },
    /// A fixed cost per sample: a sleep and/or CPU work.
    Synthetic {
        samples: usize,
        latency_us: u64,
        cpu_work_rounds: u64,
    },
    /// An image directory, or (no `dir`) a generated JPEG set of `samples`
    /// images of `width × height`.
    Images {
        dir: Option<PathBuf>,
        samples: usize,
        width: u32,
        height: u32,
        resize: u32,
        flip: bool,
        random_crop: bool,
        decoder: JpegDecoder,
        scaled_decode: bool,
    },
    /// FashionMNIST IDX files from `dir` (else `--data-dir`, else a
    /// generated stand-in of the same shape written as IDX files).
    FashionMnist {
        dir: Option<PathBuf>,
        samples: usize,
    },
    /// A user's `torch.utils.data.Dataset` (pytorch engine only):
    /// `factory` is `module:function`, imported with `path` first on
    /// `sys.path` and called with `args`.
    Python {
        factory: String,
        path: PathBuf,
        args: serde_json::Map<String, serde_json::Value>,
    },
}

impl DataPlan {
    pub fn name(&self) -> &'static str {
        match self {
            DataPlan::Tensor { .. } => "tensor",
            DataPlan::Synthetic { .. } => "synthetic",
            DataPlan::Images { .. } => "images",
            DataPlan::Python { .. } => "python",
            DataPlan::FashionMnist { .. } => "fashionmnist",
        }
    }
}

/// Whose loader and loop runs a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EngineName {
    Native,
    Pytorch,
    Spdl,
    /// NVIDIA DALI's pipeline in the harness.
    Dali,
    /// torchdata.nodes in the harness.
    Nodes,
}

impl EngineName {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineName::Native => "native",
            EngineName::Pytorch => "pytorch",
            EngineName::Spdl => "spdl",
            EngineName::Dali => "dali",
            EngineName::Nodes => "nodes",
        }
    }
    /// The bundle's engine.
    pub fn bundle(self) -> stallscope_bundle::Engine {
        match self {
            EngineName::Native => stallscope_bundle::Engine::Native,
            EngineName::Pytorch => stallscope_bundle::Engine::Pytorch,
            EngineName::Spdl => stallscope_bundle::Engine::Spdl,
            EngineName::Dali => stallscope_bundle::Engine::Dali,
            EngineName::Nodes => stallscope_bundle::Engine::Nodes,
        }
    }
}

/// Where DALI decodes and runs its operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaliDevice {
    /// CPU operators (`device_id=None` on a machine without a GPU).
    Cpu,
    /// nvJPEG decoding and GPU operators (a CUDA device only).
    Mixed,
}

impl DaliDevice {
    pub fn as_str(self) -> &'static str {
        match self {
            DaliDevice::Cpu => "cpu",
            DaliDevice::Mixed => "mixed",
        }
    }
}

/// The multiprocessing start method of PyTorch DataLoader workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpContext {
    Fork,
    Spawn,
    Forkserver,
}

impl MpContext {
    pub fn as_str(self) -> &'static str {
        match self {
            MpContext::Fork => "fork",
            MpContext::Spawn => "spawn",
            MpContext::Forkserver => "forkserver",
        }
    }
}

/// `model = "python"`: the user's own model, built in the harness by
/// `factory` (`module:function`, imported from the python source's
/// folder, called with `args`), trained on the user's Dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct PythonModel {
    pub factory: String,
    pub args: serde_json::Map<String, serde_json::Value>,
}

/// A validated loader experiment (or, for `stall`, one loader configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderPlan {
    /// The model trained; with `loader_only`, only the shape of the data
    /// it would take (features and classes, or the crop); with
    /// `python_model`, unused (the harness builds the user's model).
    pub model: ModelSpec,
    /// `model = "python"`: the user's model (pytorch engine, python source).
    pub python_model: Option<PythonModel>,
    /// `model = "none"`: a loop over the loader alone, no copy, no step.
    pub loader_only: bool,
    /// `engines`: native, pytorch, spdl, dali, nodes (a swept dimension).
    pub engines: Vec<EngineName>,
    /// `batched_fetch`: the DataLoader fetches a batch through the
    /// Dataset's `__getitems__` (pytorch only).
    pub batched_fetch: Vec<bool>,
    /// `dali_device`: where DALI decodes (dali only).
    pub dali_devices: Vec<DaliDevice>,
    /// `contexts`: the DataLoader's start methods (pytorch only).
    pub contexts: Vec<MpContext>,
    /// `prefetch_to_device`: copy the next batch on a side stream.
    pub prefetch_to_device: Vec<bool>,
    pub data: DataPlan,
    pub batch_size: usize,
    pub workers: Vec<usize>,
    /// What `"auto"` in `workers` came to on this machine, and why.
    pub workers_auto: Option<String>,
    pub kinds: Vec<WorkerKind>,
    pub prefetch: Vec<usize>,
    pub persistent: Vec<bool>,
    pub pinned: Vec<bool>,
    pub shuffle: bool,
    pub drop_last: bool,
    pub in_order: bool,
    pub on_bad_sample: OnBadSample,
}
