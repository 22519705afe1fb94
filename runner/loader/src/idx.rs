//! FashionMNIST's IDX files: parsing with errors that name the file, the byte
//! and what was expected; the deterministic stand-in of the same shape
//! (written as IDX files, so every engine and back end reads the same files);
//! and the `fashionmnist` source of the loader (1×28×28 float32 in [0, 1]).
//!
//! A public namespace of the loader (`stallscope_loader::idx`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::rng::Rng;
use super::sample::{SampleError, Source, SourceOpenError};
use super::stats::{Stage, StageTimes};

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

/// Read and check the images and labels of `dir`: `N × 28 × 28` images,
/// `N` labels in 0..10.
pub fn read_pair(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), IdxError> {
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
    Ok((pixels, labels))
}

/// `samples` images of FashionMNIST's shape and labels over the 10 classes,
/// generated from `seed` (the stand-in when no IDX folder is given).
pub fn synthetic_pair(samples: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng::new(seed);
    let mut pixels = vec![0u8; samples * 784];
    for chunk in pixels.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
    let labels: Vec<u8> = (0..samples).map(|_| rng.below(10) as u8).collect();
    (pixels, labels)
}

/// The stand-in written as IDX files under `cache` (once; reused), so the
/// peer engines read the very same bytes. Returns its folder.
pub fn ensure_synthetic_dir(cache: &Path, samples: usize, seed: u64) -> std::io::Result<PathBuf> {
    let dir = cache.join(format!("fashionmnist-shape-{samples}-seed{seed}"));
    if dir.join(IMAGES_FILE).exists() && dir.join(LABELS_FILE).exists() {
        return Ok(dir);
    }
    let (pixels, labels) = synthetic_pair(samples, seed);
    let tmp = cache.join(format!(
        ".fashionmnist-{}-{samples}-{seed}",
        std::process::id()
    ));
    std::fs::create_dir_all(&tmp)?;
    let mut images = 0x0000_0803u32.to_be_bytes().to_vec();
    for d in [samples as u32, 28, 28] {
        images.extend(d.to_be_bytes());
    }
    images.extend(&pixels);
    let mut lab = 0x0000_0801u32.to_be_bytes().to_vec();
    lab.extend((samples as u32).to_be_bytes());
    lab.extend(&labels);
    std::fs::write(tmp.join(IMAGES_FILE), images)?;
    std::fs::write(tmp.join(LABELS_FILE), lab)?;
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(dir)
}

/// The `fashionmnist` source: the first `samples` of an IDX folder.
pub struct IdxSource {
    pixels: Vec<u8>,
    labels: Vec<u8>,
}

impl IdxSource {
    pub fn open(dir: &Path, samples: usize) -> Result<IdxSource, SourceOpenError> {
        let (mut pixels, mut labels) =
            read_pair(dir).map_err(|e| SourceOpenError::Shape(e.to_string()))?;
        if samples > labels.len() {
            return Err(SourceOpenError::Shape(format!(
                "{}: holds {} samples; expected at least the {samples} the suite asks for",
                dir.join(LABELS_FILE).display(),
                labels.len()
            )));
        }
        labels.truncate(samples);
        pixels.truncate(samples * 784);
        Ok(IdxSource { pixels, labels })
    }
}

impl Source for IdxSource {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn sample_dims(&self) -> Vec<usize> {
        vec![1, 28, 28]
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
        let row = &self.pixels[i * 784..(i + 1) * 784];
        for (o, &p) in out.iter_mut().zip(row) {
            *o = f32::from(p) / 255.0;
        }
        times.add(Stage::Read, start.elapsed());
        Ok(i64::from(self.labels[i]))
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
    fn the_stand_in_is_written_once_and_reads_back() {
        let cache =
            std::env::temp_dir().join(format!("stallscope-idx-test-{}", std::process::id()));
        let dir = ensure_synthetic_dir(&cache, 12, 3).unwrap();
        let (pixels, labels) = read_pair(&dir).unwrap();
        assert_eq!((pixels, labels), synthetic_pair(12, 3));
        let src = IdxSource::open(&dir, 5).unwrap();
        assert_eq!(src.len(), 5);
        let e = IdxSource::open(&dir, 13).err().unwrap().to_string();
        assert!(e.contains("holds 12 samples"), "{e}");
        let _ = std::fs::remove_dir_all(&cache);
    }
}
