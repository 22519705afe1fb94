//! A parser per experiment kind (the loader and stall kinds are in
//! `loader.rs`): each checks its knobs and returns the validated spec.

use super::located::{Located, SuiteError};
use super::plan::{DataSpec, ExperimentSpec};
use super::raw::{RawExperiment, RawKnobs};
use crate::model_spec::ModelSpec;

/// One experiment being parsed: its raw table, its knobs after `--quick`
/// overrides, and where it sits.
pub(super) struct ExperimentCx<'a> {
    pub cx: &'a Located<'a>,
    pub e: &'a RawExperiment,
    pub k: &'a RawKnobs,
    pub index: usize,
}

impl ExperimentCx<'_> {
    /// The key of one of this experiment's fields, `experiment[2].steps`.
    pub(super) fn at(&self, key: &str) -> String {
        format!("experiment[{}].{key}", self.index)
    }

    pub(super) fn model(&self, default: &str) -> Result<ModelSpec, SuiteError> {
        let (name, span) = match &self.e.model {
            Some(m) => (m.get_ref().as_str(), m.span()),
            None => (default, self.e.kind.span()),
        };
        self.model_spec(name, span)
    }

    /// The model `name` with this experiment's shape keys (for
    /// `model = "none"`, whose data still has a shape).
    pub(super) fn model_named(&self, name: &str) -> Result<ModelSpec, SuiteError> {
        self.model_spec(name, self.e.kind.span())
    }

    fn model_spec(
        &self,
        name: &str,
        span: std::ops::Range<usize>,
    ) -> Result<ModelSpec, SuiteError> {
        match name {
            "fashion_cnn" => Ok(ModelSpec::FashionCnn),
            "linear" => Ok(ModelSpec::Linear {
                features: self.e.features.as_ref().map_or(Ok(64), |v| {
                    self.cx.positive(v, &self.at("features"), 1 << 20)
                })?,
                classes: self
                    .e
                    .classes
                    .as_ref()
                    .map_or(Ok(4), |v| self.cx.positive(v, &self.at("classes"), 100_000))?,
            }),
            "image_cnn" => Ok(ModelSpec::ImageCnn {
                size: self.e.image_size.as_ref().map_or(Ok(224), |v| {
                    self.cx.positive(v, &self.at("image_size"), 4096)
                })?,
                classes: self.e.classes.as_ref().map_or(Ok(1000), |v| {
                    self.cx.positive(v, &self.at("classes"), 100_000)
                })?,
            }),
            other => Err(self.cx.err(
                span,
                &self.at("model"),
                format!("{other:?}; expected fashion_cnn, linear or image_cnn (or none or python, for kind = \"loader\")"),
            )),
        }
    }

    pub(super) fn batch_sizes(&self, default: &[i64]) -> Result<Vec<i64>, SuiteError> {
        match &self.k.batch_sizes {
            Some(v) => self.cx.positive_list(v, &self.at("batch_sizes"), 1 << 24),
            None => Ok(default.to_vec()),
        }
    }

    pub(super) fn compute(&self) -> Result<ExperimentSpec, SuiteError> {
        Ok(ExperimentSpec::Compute {
            model: self.model("fashion_cnn")?,
            batch_sizes: self.batch_sizes(&[256])?,
            steps: self.k.steps.as_ref().map_or(Ok(20), |v| {
                self.cx.positive(v, &self.at("steps"), 1_000_000)
            })? as u32,
        })
    }

    pub(super) fn transfer(&self) -> Result<ExperimentSpec, SuiteError> {
        Ok(ExperimentSpec::Transfer {
            sizes_bytes: match &self.k.sizes_kib {
                Some(v) => self.cx.positive_list(v, &self.at("sizes_kib"), 16 << 20)?,
                None => vec![784],
            }
            .into_iter()
            .map(|kib| kib as u64 * 1024)
            .collect(),
            copies: self.k.copies.as_ref().map_or(Ok(20), |v| {
                self.cx.positive(v, &self.at("copies"), 1_000_000)
            })? as u32,
            pinned: self.e.pinned.clone().unwrap_or_else(|| vec![false, true]),
            non_blocking: self
                .e
                .non_blocking
                .clone()
                .unwrap_or_else(|| vec![false, true]),
        })
    }

    pub(super) fn batch_sweep(&self) -> Result<ExperimentSpec, SuiteError> {
        let model = self.model("fashion_cnn")?;
        let samples = self.k.samples.as_ref().map_or(Ok(60_000), |v| {
            self.cx.positive(v, &self.at("samples"), 100_000_000)
        })? as usize;
        let data_name = self
            .e
            .data
            .as_ref()
            .map_or("fashionmnist", |d| d.get_ref().as_str());
        let data = match (data_name, model) {
            ("fashionmnist", ModelSpec::FashionCnn) => DataSpec::FashionMnist { samples },
            ("tensor", ModelSpec::Linear { features, classes }) => DataSpec::Tensor {
                samples,
                features: features as usize,
                classes: classes as usize,
            },
            (d, m) => {
                let span = self
                    .e
                    .data
                    .as_ref()
                    .map_or(self.e.kind.span(), |d| d.span());
                return Err(self.cx.err(
                    span,
                    &self.at("data"),
                    format!("{d:?} with model {}; expected fashionmnist with fashion_cnn, or tensor with linear", m.name()),
                ));
            }
        };
        Ok(ExperimentSpec::BatchSweep {
            model,
            data,
            batch_sizes: self.batch_sizes(&[32, 64, 128, 256, 512, 1024, 2048, 4096, 8192])?,
        })
    }

    pub(super) fn oom_probe(&self) -> Result<ExperimentSpec, SuiteError> {
        let fraction = match &self.e.memory_fraction {
            Some(v) => {
                let f = *v.get_ref();
                if !(f > 0.0 && f <= 1.0) {
                    return Err(self.cx.err(
                        v.span(),
                        &self.at("memory_fraction"),
                        format!("{f} is out of range; expected a number in (0, 1]"),
                    ));
                }
                f
            }
            None => 0.25,
        };
        let start = self.e.start_batch.as_ref().map_or(Ok(1024), |v| {
            self.cx.positive(v, &self.at("start_batch"), 1 << 30)
        })?;
        let max = self.k.max_batch.as_ref().map_or(Ok(1 << 20), |v| {
            self.cx.positive(v, &self.at("max_batch"), 1 << 30)
        })?;
        if max < start {
            let span = self
                .k
                .max_batch
                .as_ref()
                .map_or(self.e.kind.span(), |v| v.span());
            return Err(self.cx.err(
                span,
                &self.at("max_batch"),
                format!("{max} is below start_batch {start}; expected max_batch >= start_batch"),
            ));
        }
        Ok(ExperimentSpec::OomProbe {
            model: self.model("fashion_cnn")?,
            memory_fraction: fraction,
            start_batch: start,
            max_batch: max,
        })
    }
}
