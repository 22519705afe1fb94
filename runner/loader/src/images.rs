//! The image source: a directory of JPEG/PNG files (labels from class
//! sub-folders), decoded with `image` (zune-jpeg inside), resized with
//! `fast_image_resize` (SIMD), randomly cropped and flipped, normalised, CHW.

use std::path::{Path, PathBuf};
use std::time::Instant;

use fast_image_resize::images::Image;
use fast_image_resize::{PixelType, ResizeAlg, ResizeOptions, Resizer};
use serde::{Deserialize, Serialize};

use super::rng::Rng;
use super::source::{SampleError, Source, SourceOpenError};
use super::stats::{Stage, StageTimes};

/// ImageNet channel means and standard deviations (the usual normalisation).
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// An image directory and its transform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageSpec {
    pub dir: PathBuf,
    /// The shorter side is resized to this many pixels.
    pub resize: u32,
    /// Then a random `crop × crop` window is cut (centre crop if not `random_crop`).
    pub crop: u32,
    #[serde(default = "yes")]
    pub random_crop: bool,
    /// Mirror horizontally with probability ½.
    #[serde(default = "yes")]
    pub flip: bool,
}

fn yes() -> bool {
    true
}

/// The files of an image directory and their labels.
pub struct ImageDirSource {
    spec: ImageSpec,
    files: Vec<(PathBuf, i64)>,
}

fn is_image(path: &Path) -> bool {
    matches!(
        path.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("jpg" | "jpeg" | "png")
    )
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut entries = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.sort();
    Ok(entries)
}

impl ImageDirSource {
    /// List the images: class sub-folders (sorted by name, label = position)
    /// or, with no sub-folders, the images at the top (label 0).
    pub fn open(spec: &ImageSpec) -> Result<Self, SourceOpenError> {
        let err = |message: String| SourceOpenError::ImageDir {
            path: spec.dir.clone(),
            message,
        };
        if spec.crop == 0 || spec.resize < spec.crop {
            return Err(err(format!(
                "resize ({}) must be at least crop ({}) and crop at least 1",
                spec.resize, spec.crop
            )));
        }
        let entries = sorted_entries(&spec.dir).map_err(|e| err(e.to_string()))?;
        let classes: Vec<&PathBuf> = entries.iter().filter(|p| p.is_dir()).collect();
        let mut files = Vec::new();
        if classes.is_empty() {
            files.extend(
                entries
                    .iter()
                    .filter(|p| is_image(p))
                    .map(|p| (p.clone(), 0)),
            );
        } else {
            for (label, class) in classes.iter().enumerate() {
                let inner = sorted_entries(class).map_err(|e| err(e.to_string()))?;
                files.extend(
                    inner
                        .into_iter()
                        .filter(|p| is_image(p))
                        .map(|p| (p, label as i64)),
                );
            }
        }
        if files.is_empty() {
            return Err(err(
                "no .jpg/.jpeg/.png files (expected images, or class sub-folders of images)".into(),
            ));
        }
        Ok(ImageDirSource {
            spec: spec.clone(),
            files,
        })
    }

    pub fn path(&self, index: u64) -> &Path {
        &self.files[index as usize].0
    }

    /// Every image with its label, in sample order (what the peer engines
    /// are given, so they read the same files as the same samples).
    pub fn files(&self) -> &[(PathBuf, i64)] {
        &self.files
    }
}

impl Source for ImageDirSource {
    fn len(&self) -> usize {
        self.files.len()
    }
    fn sample_dims(&self) -> Vec<usize> {
        let c = self.spec.crop as usize;
        vec![3, c, c]
    }
    fn load(
        &self,
        index: u64,
        rng: &mut Rng,
        out: &mut [f32],
        times: &mut StageTimes,
    ) -> Result<i64, SampleError> {
        let (path, label) = &self.files[index as usize];
        let bad = |stage: Stage, message: String| SampleError {
            index,
            path: Some(path.display().to_string()),
            message,
            stage,
        };
        let start = Instant::now();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                times.fail(Stage::Read, start.elapsed());
                return Err(bad(Stage::Read, format!("cannot read: {e}")));
            }
        };
        times.add(Stage::Read, start.elapsed());
        let start = Instant::now();
        let decoded = match image::load_from_memory(&bytes) {
            Ok(img) => img.into_rgb8(),
            Err(e) => {
                times.fail(Stage::Decode, start.elapsed());
                return Err(bad(Stage::Decode, format!("cannot decode: {e}")));
            }
        };
        times.add(Stage::Decode, start.elapsed());
        let start = Instant::now();
        transform(&self.spec, decoded, rng, out).map_err(|m| bad(Stage::Transform, m))?;
        times.add(Stage::Transform, start.elapsed());
        Ok(*label)
    }
}

/// Resize the shorter side, crop, flip, normalise into CHW `out`.
fn transform(
    spec: &ImageSpec,
    img: image::RgbImage,
    rng: &mut Rng,
    out: &mut [f32],
) -> Result<(), String> {
    let (w, h) = img.dimensions();
    if w == 0 || h == 0 {
        return Err("the image has no pixels".into());
    }
    let short = w.min(h) as f64;
    let scale = spec.resize as f64 / short;
    let nw = ((w as f64 * scale).round() as u32).max(spec.resize);
    let nh = ((h as f64 * scale).round() as u32).max(spec.resize);
    let src =
        Image::from_vec_u8(w, h, img.into_raw(), PixelType::U8x3).map_err(|e| e.to_string())?;
    let mut dst = Image::new(nw, nh, PixelType::U8x3);
    Resizer::new()
        .resize(
            &src,
            &mut dst,
            &ResizeOptions::new().resize_alg(ResizeAlg::Convolution(
                fast_image_resize::FilterType::Bilinear,
            )),
        )
        .map_err(|e| e.to_string())?;
    let c = spec.crop;
    let (x0, y0) = if spec.random_crop {
        (
            rng.below((nw - c + 1) as u64) as u32,
            rng.below((nh - c + 1) as u64) as u32,
        )
    } else {
        ((nw - c) / 2, (nh - c) / 2)
    };
    let flip = spec.flip && rng.coin();
    let pixels = dst.buffer();
    let plane = (c * c) as usize;
    for y in 0..c {
        let row = ((y0 + y) * nw) as usize;
        for x in 0..c {
            let sx = if flip { x0 + c - 1 - x } else { x0 + x };
            let p = (row + sx as usize) * 3;
            let o = (y * c + x) as usize;
            for ch in 0..3 {
                out[ch * plane + o] =
                    (pixels[p + ch] as f32 / 255.0 - IMAGENET_MEAN[ch]) / IMAGENET_STD[ch];
            }
        }
    }
    Ok(())
}
