//! Data for the experiments: seeds/000's in-memory tensors and FashionMNIST
//! (IDX files from a directory, or generated deterministically with the same
//! shape when no directory is given), as [`Dataset`]s.

use std::path::Path;

use crate::feed::{Dataset, FeedError, HostBatch, TensorDataset};

use stallscope_loader::idx::IdxError;

/// FashionMNIST images (`N × 1 × 28 × 28` uint8) and labels, collated to
/// float32 in `[0, 1]` per batch (as `ToTensor` does).
pub struct FashionMnist {
    pixels: Vec<u8>,
    labels: Vec<u8>,
    /// `idx:<dir>` or `synthetic-fashionmnist-shape`.
    pub source: String,
}

impl FashionMnist {
    /// Read `train-images-idx3-ubyte` and `train-labels-idx1-ubyte` from `dir`.
    pub fn from_dir(dir: &Path) -> Result<FashionMnist, IdxError> {
        let (pixels, labels) = stallscope_loader::idx::read_pair(dir)?;
        Ok(FashionMnist {
            pixels,
            labels,
            source: format!("idx:{}", dir.display()),
        })
    }

    /// Generated deterministically from `seed`: `samples` images with the
    /// FashionMNIST shape and labels spread over the 10 classes.
    pub fn synthetic(samples: usize, seed: u64) -> FashionMnist {
        let (pixels, labels) = stallscope_loader::idx::synthetic_pair(samples, seed);
        FashionMnist {
            pixels,
            labels,
            source: "synthetic-fashionmnist-shape".into(),
        }
    }

    /// Keep only the first `n` samples (quick runs).
    pub fn truncate(mut self, n: usize) -> FashionMnist {
        let n = n.min(self.labels.len());
        self.labels.truncate(n);
        self.pixels.truncate(n * 784);
        self
    }
}

impl Dataset for FashionMnist {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn sample_shape(&self) -> Vec<i64> {
        vec![1, 28, 28]
    }
    fn collate(&self, indices: &[u64]) -> Result<HostBatch, FeedError> {
        let mut inputs = Vec::with_capacity(784 * indices.len());
        let mut labels = Vec::with_capacity(indices.len());
        for &i in indices {
            let i = i as usize;
            let row = self
                .pixels
                .get(i * 784..(i + 1) * 784)
                .ok_or_else(|| FeedError::Sample {
                    index: i as u64,
                    message: format!("index out of range, expected < {}", self.len()),
                })?;
            inputs.extend(row.iter().map(|&p| f32::from(p) / 255.0));
            labels.push(i64::from(self.labels[i]));
        }
        crate::feed::owned_batch(inputs, &[indices.len() as i64, 1, 28, 28], labels, indices)
    }
}

/// seeds/000's data as a libtorch dataset: the loader crate's one generator
/// ([`stallscope_loader::tensor_data`]), so every back end, engine and worker
/// kind sees the same bytes for the same seed.
pub fn tensor_data(samples: usize, features: usize, classes: u64, seed: u64) -> TensorDataset {
    let (inputs, labels) =
        stallscope_loader::tensor_data(samples, features, classes as usize, seed);
    TensorDataset {
        inputs,
        labels,
        shape: vec![features as i64],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_is_deterministic() {
        let a = FashionMnist::synthetic(100, 5);
        let b = FashionMnist::synthetic(100, 5);
        assert_eq!(a.pixels, b.pixels);
        assert_eq!(a.labels, b.labels);
        assert!(a.labels.iter().any(|&l| l != a.labels[0]));
        let batch = a.collate(&[3, 1]).unwrap();
        assert_eq!(batch.inputs.size(), vec![2, 1, 28, 28]);
        assert_eq!(batch.inputs.kind(), tch::Kind::Float);
        let px = Vec::<f32>::try_from(batch.inputs.get(0).flatten(0, -1)).unwrap();
        assert_eq!(px[5], f32::from(a.pixels[3 * 784 + 5]) / 255.0);
    }
}
