//! Data sources the loader reads samples from, described by a serializable
//! [`SourceSpec`] so a worker process can rebuild the same source: in-memory
//! tensors (seeds/000), a synthetic source with a fixed per-sample latency or
//! CPU work (the PyTorch data-loading tutorial), and a directory of images.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::image_spec::ImageSpec;
use super::images::ImageDirSource;
use super::rng::Rng;
use super::sample::{SampleError, Source, SourceOpenError};
use super::stats::{Stage, StageTimes};

/// What a source is, in a form that crosses a process boundary (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceSpec {
    /// `samples × features` float32 drawn from N(0, 1) and labels in
    /// `0..classes`, generated in memory from `seed` (seeds/000: 4096 × 64).
    Tensor {
        samples: usize,
        features: usize,
        classes: usize,
        seed: u64,
    },
    /// Each sample costs a fixed latency (a sleep, as the PyTorch tutorial's
    /// 5 ms) and/or a fixed amount of CPU work; its values are cheap.
    Synthetic {
        samples: usize,
        features: usize,
        classes: usize,
        #[serde(default)]
        latency_us: u64,
        /// Rounds of a fixed arithmetic loop per sample (CPU-bound work).
        #[serde(default)]
        cpu_work_rounds: u64,
    },
    /// A directory of JPEG/PNG images: decode, resize, crop, flip, normalise.
    Images(ImageSpec),
    /// FashionMNIST IDX files (`train-images-idx3-ubyte`,
    /// `train-labels-idx1-ubyte`) in `dir`: the first `samples`, 1×28×28
    /// float32 in [0, 1].
    Idx { dir: PathBuf, samples: usize },
}

/// A fault injected on purpose (tests and demonstrations of the failure path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    /// The worker panics while loading this sample.
    PanicAt { sample: u64 },
    /// The worker's process ends abruptly (abort) while loading this sample;
    /// a thread worker panics instead.
    AbortAt { sample: u64 },
}

/// Build the source a spec describes (generating in-memory data if asked).
pub fn open_source(spec: &SourceSpec) -> Result<Box<dyn Source>, SourceOpenError> {
    match spec {
        SourceSpec::Tensor {
            samples,
            features,
            classes,
            seed,
        } => Ok(Box::new(TensorSource::generate(
            *samples, *features, *classes, *seed,
        )?)),
        SourceSpec::Synthetic {
            samples,
            features,
            classes,
            latency_us,
            cpu_work_rounds,
        } => {
            check_shape(*samples, *features, *classes)?;
            Ok(Box::new(SyntheticSource {
                samples: *samples,
                features: *features,
                classes: *classes,
                latency: Duration::from_micros(*latency_us),
                cpu_work_rounds: *cpu_work_rounds,
            }))
        }
        SourceSpec::Images(spec) => Ok(Box::new(ImageDirSource::open(spec)?)),
        SourceSpec::Idx { dir, samples } => {
            Ok(Box::new(super::idx::IdxSource::open(dir, *samples)?))
        }
    }
}

fn check_shape(samples: usize, features: usize, classes: usize) -> Result<(), SourceOpenError> {
    if samples == 0 || features == 0 || classes == 0 {
        return Err(SourceOpenError::Shape(format!(
            "samples, features and classes must be at least 1 (got {samples}, {features}, {classes})"
        )));
    }
    Ok(())
}

/// In-memory float32 rows and labels (seeds/000's `TensorDataset`).
pub struct TensorSource {
    features: usize,
    values: Vec<f32>,
    labels: Vec<i64>,
}

impl TensorSource {
    pub fn generate(
        samples: usize,
        features: usize,
        classes: usize,
        seed: u64,
    ) -> Result<Self, SourceOpenError> {
        check_shape(samples, features, classes)?;
        let (values, labels) = super::rng::tensor_data(samples, features, classes, seed);
        Ok(TensorSource {
            features,
            values,
            labels,
        })
    }
}

impl Source for TensorSource {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn sample_dims(&self) -> Vec<usize> {
        vec![self.features]
    }
    fn load(
        &self,
        index: u64,
        _rng: &mut Rng,
        out: &mut [f32],
        times: &mut StageTimes,
    ) -> Result<i64, SampleError> {
        let start = Instant::now();
        let i = index as usize;
        out.copy_from_slice(&self.values[i * self.features..(i + 1) * self.features]);
        times.add(Stage::Read, start.elapsed());
        Ok(self.labels[i])
    }
}

/// Samples with a fixed cost: a sleep (I/O-like latency) and/or CPU work.
pub struct SyntheticSource {
    samples: usize,
    features: usize,
    classes: usize,
    latency: Duration,
    cpu_work_rounds: u64,
}

impl Source for SyntheticSource {
    fn len(&self) -> usize {
        self.samples
    }
    fn sample_dims(&self) -> Vec<usize> {
        vec![self.features]
    }
    fn load(
        &self,
        index: u64,
        _rng: &mut Rng,
        out: &mut [f32],
        times: &mut StageTimes,
    ) -> Result<i64, SampleError> {
        let start = Instant::now();
        if !self.latency.is_zero() {
            std::thread::sleep(self.latency);
        }
        let mut value = Rng::new(index);
        for slot in out.iter_mut() {
            *slot = value.unit_f64() as f32;
        }
        times.add(Stage::Read, start.elapsed());
        if self.cpu_work_rounds > 0 {
            let start = Instant::now();
            let mut acc = index as f64;
            for round in 0..self.cpu_work_rounds {
                acc = (acc * 1.000_000_1 + round as f64).sqrt();
            }
            out[0] += std::hint::black_box(acc) as f32 * 0.0;
            times.add(Stage::Transform, start.elapsed());
        }
        Ok((index % self.classes as u64) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_source_is_deterministic_per_seed() {
        let a = TensorSource::generate(16, 4, 3, 1).unwrap();
        let b = TensorSource::generate(16, 4, 3, 1).unwrap();
        let c = TensorSource::generate(16, 4, 3, 2).unwrap();
        assert_eq!(a.values, b.values);
        assert_ne!(a.values, c.values);
        assert!(a.labels.iter().all(|&l| (0..3).contains(&l)));
    }

    #[test]
    fn synthetic_latency_is_paid_per_sample() {
        let src = open_source(&SourceSpec::Synthetic {
            samples: 4,
            features: 2,
            classes: 2,
            latency_us: 2000,
            cpu_work_rounds: 0,
        })
        .unwrap();
        let mut times = StageTimes::default();
        let mut out = [0.0f32; 2];
        let start = Instant::now();
        for i in 0..4 {
            src.load(i, &mut Rng::new(0), &mut out, &mut times).unwrap();
        }
        assert!(start.elapsed() >= Duration::from_millis(8));
        assert_eq!(times.get(Stage::Read).tasks, 4);
    }

    #[test]
    fn empty_shapes_are_refused() {
        let err = open_source(&SourceSpec::Tensor {
            samples: 0,
            features: 4,
            classes: 2,
            seed: 0,
        })
        .err()
        .unwrap();
        assert!(err.to_string().contains("at least 1"));
    }
}
