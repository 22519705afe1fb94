//! Data for the experiments: seeds/000's in-memory tensors and FashionMNIST
//! (IDX files from a directory, or generated deterministically with the same
//! shape when no directory is given), as [`Dataset`]s.

use std::path::{Path, PathBuf};

use tch::Tensor;

use crate::feed::{Dataset, FeedError, HostBatch, TensorDataset};

/// Why IDX files could not be used. Every variant names the file, the byte
/// offset and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum IdxError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: byte {offset}: bad magic number 0x{found:08x}, expected 0x{expected:08x} ({what})", path.display())]
    BadMagic {
        path: PathBuf,
        offset: u64,
        found: u32,
        expected: u32,
        what: &'static str,
    },
    #[error("{}: byte {offset}: dimension {index} is {found}, expected {expected}", path.display())]
    WrongDimension {
        path: PathBuf,
        offset: u64,
        index: usize,
        found: u32,
        expected: String,
    },
    #[error("{}: byte {offset}: file ends early: expected {expected} bytes in all, found {found}", path.display())]
    Truncated {
        path: PathBuf,
        offset: u64,
        expected: u64,
        found: u64,
    },
    #[error("{}: byte {offset}: {found} trailing bytes after the data, expected none", path.display())]
    Trailing {
        path: PathBuf,
        offset: u64,
        found: u64,
    },
    #[error("{}: byte {offset}: label {found} out of range, expected 0..{classes}", path.display())]
    BadLabel {
        path: PathBuf,
        offset: u64,
        found: u8,
        classes: u8,
    },
    #[error("{}: holds {labels} labels but {} holds {images} images; expected the same count", labels_path.display(), images_path.display())]
    CountMismatch {
        images_path: PathBuf,
        labels_path: PathBuf,
        images: u32,
        labels: u32,
    },
}

/// File names of the FashionMNIST training set.
pub const IMAGES_FILE: &str = "train-images-idx3-ubyte";
pub const LABELS_FILE: &str = "train-labels-idx1-ubyte";

/// Parse an IDX file of unsigned bytes with `dims` dimensions. `expect`
/// gives, per dimension, the required size (None: any non-zero size).
/// Returns the dimensions and the data.
pub fn parse_idx_u8(
    path: &Path,
    bytes: &[u8],
    expect: &[Option<u32>],
) -> Result<(Vec<u32>, Vec<u8>), IdxError> {
    let dims = expect.len();
    let magic_expected = 0x0000_0800 | dims as u32;
    let what = match dims {
        1 => "IDX labels: unsigned bytes, 1 dimension",
        3 => "IDX images: unsigned bytes, 3 dimensions",
        _ => "IDX unsigned bytes",
    };
    let header = 4 + 4 * dims as u64;
    if (bytes.len() as u64) < 4 {
        return Err(IdxError::Truncated {
            path: path.into(),
            offset: bytes.len() as u64,
            expected: header,
            found: bytes.len() as u64,
        });
    }
    let magic = u32::from_be_bytes(bytes[0..4].try_into().expect("4 bytes"));
    if magic != magic_expected {
        return Err(IdxError::BadMagic {
            path: path.into(),
            offset: 0,
            found: magic,
            expected: magic_expected,
            what,
        });
    }
    if (bytes.len() as u64) < header {
        return Err(IdxError::Truncated {
            path: path.into(),
            offset: bytes.len() as u64,
            expected: header,
            found: bytes.len() as u64,
        });
    }
    let mut sizes = Vec::with_capacity(dims);
    for (i, want) in expect.iter().enumerate() {
        let at = 4 + 4 * i;
        let size = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let ok = match want {
            Some(w) => size == *w,
            None => size > 0,
        };
        if !ok {
            return Err(IdxError::WrongDimension {
                path: path.into(),
                offset: at as u64,
                index: i,
                found: size,
                expected: want.map_or("a positive size".into(), |w| w.to_string()),
            });
        }
        sizes.push(size);
    }
    let data_len: u64 = sizes.iter().map(|&s| u64::from(s)).product();
    let total = header + data_len;
    if (bytes.len() as u64) < total {
        return Err(IdxError::Truncated {
            path: path.into(),
            offset: bytes.len() as u64,
            expected: total,
            found: bytes.len() as u64,
        });
    }
    if (bytes.len() as u64) > total {
        return Err(IdxError::Trailing {
            path: path.into(),
            offset: total,
            found: bytes.len() as u64 - total,
        });
    }
    Ok((sizes, bytes[header as usize..].to_vec()))
}

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
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path)
                .map(|b| (path.clone(), b))
                .map_err(|source| IdxError::Io { path, source })
        };
        let (ip, ib) = read(IMAGES_FILE)?;
        let (lp, lb) = read(LABELS_FILE)?;
        let (idims, pixels) = parse_idx_u8(&ip, &ib, &[None, Some(28), Some(28)])?;
        let (ldims, labels) = parse_idx_u8(&lp, &lb, &[None])?;
        if idims[0] != ldims[0] {
            return Err(IdxError::CountMismatch {
                images_path: ip,
                labels_path: lp,
                images: idims[0],
                labels: ldims[0],
            });
        }
        if let Some(i) = labels.iter().position(|&l| l >= 10) {
            return Err(IdxError::BadLabel {
                path: lp,
                offset: 8 + i as u64,
                found: labels[i],
                classes: 10,
            });
        }
        Ok(FashionMnist {
            pixels,
            labels,
            source: format!("idx:{}", dir.display()),
        })
    }

    /// Generated deterministically from `seed`: `samples` images with the
    /// FashionMNIST shape and labels spread over the 10 classes.
    pub fn synthetic(samples: usize, seed: u64) -> FashionMnist {
        let mut rng = stallscope_loader::rng::Rng::new(seed);
        let mut pixels = vec![0u8; samples * 784];
        for chunk in pixels.chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        let labels: Vec<u8> = (0..samples).map(|_| rng.below(10) as u8).collect();
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
        Ok(HostBatch {
            inputs: Tensor::f_from_slice(&inputs)?.f_view([indices.len() as i64, 1, 28, 28])?,
            labels: Tensor::f_from_slice(&labels)?,
            sample_ids: indices.to_vec(),
        })
    }
}

/// seeds/000's data as a libtorch dataset: the loader crate's one generator
/// ([`stallscope_loader::rng::tensor_data`]), so every engine and worker
/// kind sees the same bytes for the same seed.
pub fn tensor_data(samples: usize, features: usize, classes: u64, seed: u64) -> TensorDataset {
    let (inputs, labels) =
        stallscope_loader::rng::tensor_data(samples, features, classes as usize, seed);
    TensorDataset {
        inputs,
        labels,
        shape: vec![features as i64],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(magic: u32, dims: &[u32], data: usize) -> Vec<u8> {
        let mut b = magic.to_be_bytes().to_vec();
        for d in dims {
            b.extend(d.to_be_bytes());
        }
        b.extend(std::iter::repeat_n(1u8, data));
        b
    }

    #[test]
    fn good_files_parse_and_bad_ones_name_the_place() {
        let p = Path::new("x");
        let good = idx(0x803, &[2, 28, 28], 2 * 784);
        let (dims, data) = parse_idx_u8(p, &good, &[None, Some(28), Some(28)]).unwrap();
        assert_eq!(dims, vec![2, 28, 28]);
        assert_eq!(data.len(), 1568);

        let e = parse_idx_u8(
            p,
            &idx(0x801, &[2, 28, 28], 1568),
            &[None, Some(28), Some(28)],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("byte 0: bad magic number 0x00000801, expected 0x00000803"),
            "{e}"
        );

        let e = parse_idx_u8(
            p,
            &idx(0x803, &[2, 27, 28], 1512),
            &[None, Some(28), Some(28)],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("byte 8: dimension 1 is 27, expected 28"), "{e}");

        let mut short = good.clone();
        short.truncate(100);
        let e = parse_idx_u8(p, &short, &[None, Some(28), Some(28)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("byte 100: file ends early: expected 1584 bytes"),
            "{e}"
        );
    }

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
