//! Suites as written: the TOML types, deserialized with spans so every
//! later check can say where a value sits. Nothing here is validated.

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSuite {
    pub(crate) title: Option<String>,
    pub(crate) seed: Option<u64>,
    pub(crate) data_seed: Option<u64>,
    pub(crate) torch_threads: Option<Spanned<i64>>,
    pub(crate) repeats: Option<Spanned<i64>>,
    pub(crate) epochs: Option<Spanned<i64>>,
    /// Rank knobs (`suite/ranks.rs`).
    pub(crate) rank_timeout_s: Option<Spanned<f64>>,
    pub(crate) slow_rank: Option<Spanned<i64>>,
    pub(crate) slow_rank_delay_ms: Option<Spanned<f64>>,
    #[serde(default)]
    pub(crate) experiment: Vec<RawExperiment>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKnobs {
    pub(crate) repeats: Option<Spanned<i64>>,
    pub(crate) epochs: Option<Spanned<i64>>,
    pub(crate) samples: Option<Spanned<i64>>,
    pub(crate) batch_sizes: Option<Spanned<Vec<i64>>>,
    pub(crate) steps: Option<Spanned<i64>>,
    pub(crate) sizes_kib: Option<Spanned<Vec<i64>>>,
    pub(crate) copies: Option<Spanned<i64>>,
    pub(crate) max_batch: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExperiment {
    pub(crate) id: Spanned<String>,
    pub(crate) kind: Spanned<String>,
    pub(crate) title: Option<String>,
    pub(crate) model: Option<Spanned<String>>,
    /// `model = "python"`: `module:function` returning the user's model.
    pub(crate) model_factory: Option<Spanned<String>>,
    /// Keyword arguments of the model factory.
    pub(crate) model_args: Option<Spanned<toml::Table>>,
    pub(crate) data: Option<Spanned<String>>,
    pub(crate) features: Option<Spanned<i64>>,
    pub(crate) classes: Option<Spanned<i64>>,
    pub(crate) image_size: Option<Spanned<i64>>,
    pub(crate) pinned: Option<Vec<bool>>,
    pub(crate) non_blocking: Option<Vec<bool>>,
    pub(crate) memory_fraction: Option<Spanned<f64>>,
    pub(crate) start_batch: Option<Spanned<i64>>,
    pub(crate) repeats: Option<Spanned<i64>>,
    pub(crate) epochs: Option<Spanned<i64>>,
    pub(crate) samples: Option<Spanned<i64>>,
    pub(crate) batch_sizes: Option<Spanned<Vec<i64>>>,
    pub(crate) steps: Option<Spanned<i64>>,
    pub(crate) sizes_kib: Option<Spanned<Vec<i64>>>,
    pub(crate) copies: Option<Spanned<i64>>,
    pub(crate) max_batch: Option<Spanned<i64>>,
    /// `[experiment.loader]` of the loader and stall kinds.
    pub(crate) loader: Option<RawLoader>,
    /// Overrides applied with `--quick`.
    pub(crate) quick: Option<RawKnobs>,
}

/// A count as written: a number, or a name such as `"auto"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawCount {
    Number(i64),
    Name(String),
}

/// `[experiment.loader]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLoader {
    pub(crate) source: Option<Spanned<String>>,
    pub(crate) samples: Option<Spanned<i64>>,
    pub(crate) latency_ms: Option<Spanned<f64>>,
    pub(crate) cpu_work_rounds: Option<Spanned<i64>>,
    pub(crate) dir: Option<Spanned<String>>,
    pub(crate) image_width: Option<Spanned<i64>>,
    pub(crate) image_height: Option<Spanned<i64>>,
    pub(crate) resize: Option<Spanned<i64>>,
    pub(crate) flip: Option<bool>,
    pub(crate) random_crop: Option<bool>,
    /// `auto`, `libjpeg-turbo` or `zune-jpeg`.
    pub(crate) decoder: Option<Spanned<String>>,
    pub(crate) scaled_decode: Option<bool>,
    pub(crate) batch_size: Option<Spanned<i64>>,
    pub(crate) workers: Option<Spanned<Vec<RawCount>>>,
    pub(crate) worker_kinds: Option<Spanned<Vec<String>>>,
    pub(crate) prefetch: Option<Spanned<Vec<i64>>>,
    pub(crate) persistent: Option<Spanned<Vec<bool>>>,
    pub(crate) pinned: Option<Spanned<Vec<bool>>>,
    pub(crate) shuffle: Option<bool>,
    pub(crate) drop_last: Option<bool>,
    pub(crate) in_order: Option<bool>,
    pub(crate) on_bad_sample: Option<Spanned<String>>,
    pub(crate) engines: Option<Spanned<Vec<String>>>,
    pub(crate) contexts: Option<Spanned<Vec<String>>>,
    pub(crate) prefetch_to_device: Option<Spanned<Vec<bool>>>,
    /// The DataLoader fetching a batch through `__getitems__` (pytorch).
    pub(crate) batched_fetch: Option<Spanned<Vec<bool>>>,
    /// Where DALI decodes: `cpu` or `mixed` (dali).
    pub(crate) dali_device: Option<Spanned<Vec<String>>>,
    /// `source = "python"`: `module:function` returning a Dataset.
    pub(crate) factory: Option<Spanned<String>>,
    /// Keyword arguments of the factory.
    pub(crate) args: Option<toml::Table>,
    /// Folder put first on `sys.path` (relative to the suite's folder).
    pub(crate) python_path: Option<Spanned<String>>,
    /// Overrides applied with `--quick`.
    pub(crate) quick: Option<RawQuick>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQuick {
    pub(crate) samples: Option<Spanned<i64>>,
    pub(crate) workers: Option<Spanned<Vec<RawCount>>>,
    pub(crate) worker_kinds: Option<Spanned<Vec<String>>>,
    pub(crate) engines: Option<Spanned<Vec<String>>>,
}
