//! What a source is to the loader: the [`Source`] trait every source
//! implements, the error of loading one sample ([`SampleError`]) and of
//! opening a source ([`SourceOpenError`]). A leaf: the sources (`source`,
//! `images`, `idx`) implement it and the spec that builds them names them,
//! without either depending on the other's module.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::rng::Rng;
use super::stats::{Stage, StageTimes};

/// A sample that could not be used (counted, reported with its path).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("sample {index}{}: {message}", path.as_deref().map(|p| format!(" ({p})")).unwrap_or_default())]
pub struct SampleError {
    pub index: u64,
    pub path: Option<String>,
    pub message: String,
    /// The stage that failed (read or decode).
    pub stage: Stage,
}

/// A source of samples, each a fixed-size float vector and a class label.
pub trait Source: Send + Sync {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Dimensions of one sample's input (e.g. `[64]` or `[3, 112, 112]`).
    fn sample_dims(&self) -> Vec<usize>;
    /// How the source turns files into samples, where that is a choice of
    /// this machine (the image decoder and its scale), for the bundle.
    fn describe(&self) -> Option<String> {
        None
    }
    /// Load sample `index` into `out` (length = product of `sample_dims`),
    /// return its label; stage times go into `times`.
    fn load(
        &self,
        index: u64,
        rng: &mut Rng,
        out: &mut [f32],
        times: &mut StageTimes,
    ) -> Result<i64, SampleError>;
}

/// A source that cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum SourceOpenError {
    #[error("data source: {0}")]
    Shape(String),
    #[error("image directory {path}: {message}")]
    ImageDir { path: PathBuf, message: String },
}
