//! A deterministic image set for tests and benchmarks: `count` JPEGs of a
//! given size in class sub-folders, drawn from a seed, written once into a
//! cache folder and reused (a marker file records that the set is complete).

use std::path::{Path, PathBuf};

use image::codecs::jpeg::JpegEncoder;

use super::rng::Rng;

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSetSpec {
    pub count: usize,
    pub width: u32,
    pub height: u32,
    pub classes: usize,
    pub seed: u64,
    /// JPEG quality, 1–100.
    pub quality: u8,
}

impl Default for ImageSetSpec {
    fn default() -> Self {
        ImageSetSpec {
            count: 256,
            width: 500,
            height: 375,
            classes: 10,
            seed: 0,
            quality: 90,
        }
    }
}

impl ImageSetSpec {
    /// The folder name that identifies this set inside a cache root.
    pub fn folder_name(&self) -> String {
        format!(
            "images-{}x{}x{}-c{}-s{}-q{}",
            self.count, self.width, self.height, self.classes, self.seed, self.quality
        )
    }
}

/// Why the set could not be written.
#[derive(Debug, thiserror::Error)]
#[error("generating images in {path}: {message}")]
pub struct GenerateError {
    pub path: PathBuf,
    pub message: String,
}

const MARKER: &str = ".complete";

/// Write the set under `root` (or reuse it if already complete); returns its folder.
pub fn ensure_image_set(root: &Path, spec: &ImageSetSpec) -> Result<PathBuf, GenerateError> {
    let dir = root.join(spec.folder_name());
    if dir.join(MARKER).exists() {
        return Ok(dir);
    }
    let fail = |path: &Path, e: &dyn std::fmt::Display| GenerateError {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    if spec.count == 0 || spec.classes == 0 || spec.width == 0 || spec.height == 0 {
        return Err(fail(
            &dir,
            &"count, classes, width and height must be at least 1",
        ));
    }
    // Build in a temporary sibling and rename, so a half-written set is never used.
    let tmp = root.join(format!("{}.tmp-{}", spec.folder_name(), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for class in 0..spec.classes {
        let d = tmp.join(format!("class_{class:03}"));
        std::fs::create_dir_all(&d).map_err(|e| fail(&d, &e))?;
    }
    for i in 0..spec.count {
        let class = i % spec.classes;
        let path = tmp
            .join(format!("class_{class:03}"))
            .join(format!("img_{i:06}.jpg"));
        let img = draw(spec, i as u64, class);
        let file = std::fs::File::create(&path).map_err(|e| fail(&path, &e))?;
        let mut writer = std::io::BufWriter::new(file);
        JpegEncoder::new_with_quality(&mut writer, spec.quality)
            .encode_image(&img)
            .map_err(|e| fail(&path, &e))?;
    }
    std::fs::write(tmp.join(MARKER), b"").map_err(|e| fail(&tmp, &e))?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another process finished the same set first: use theirs.
        Err(_) if dir.join(MARKER).exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => Err(fail(&dir, &e)),
    }
}

/// A picture with structure a decoder has to work for: a class-tinted
/// gradient, a few rectangles and fine noise.
fn draw(spec: &ImageSetSpec, index: u64, class: usize) -> image::RgbImage {
    let mut rng = Rng::new(spec.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let (w, h) = (spec.width, spec.height);
    let tint = [
        (class * 47 % 256) as f32,
        (class * 101 % 256) as f32,
        (class * 173 % 256) as f32,
    ];
    let mut img = image::RgbImage::from_fn(w, h, |x, y| {
        let gx = x as f32 / w as f32;
        let gy = y as f32 / h as f32;
        let mut px = [0u8; 3];
        for (c, v) in px.iter_mut().enumerate() {
            let base = tint[c] * 0.5 + 127.0 * (gx + gy * (c as f32 + 1.0) / 3.0);
            *v = (base + (rng.below(24) as f32 - 12.0)).clamp(0.0, 255.0) as u8;
        }
        image::Rgb(px)
    });
    for _ in 0..4 {
        let rw = 1 + rng.below(w as u64 / 2) as u32;
        let rh = 1 + rng.below(h as u64 / 2) as u32;
        let x0 = rng.below((w - rw + 1) as u64) as u32;
        let y0 = rng.below((h - rh + 1) as u64) as u32;
        let color = image::Rgb([
            rng.below(256) as u8,
            rng.below(256) as u8,
            rng.below(256) as u8,
        ]);
        for y in y0..y0 + rh {
            for x in x0..x0 + rw {
                img.put_pixel(x, y, color);
            }
        }
    }
    img
}

/// The default cache root for generated data: `$STALLSCOPE_DATA_CACHE`, else
/// `~/.cache/stallscope/data`, else the system temporary folder.
pub fn default_cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("STALLSCOPE_DATA_CACHE") {
        return PathBuf::from(dir);
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache/stallscope/data"),
        None => std::env::temp_dir().join("stallscope-data"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_set_is_deterministic_and_reused() {
        let root = std::env::temp_dir().join(format!("stallscope-gen-{}", std::process::id()));
        let spec = ImageSetSpec {
            count: 6,
            width: 40,
            height: 30,
            classes: 3,
            seed: 5,
            quality: 85,
        };
        let dir = ensure_image_set(&root, &spec).unwrap();
        let first = std::fs::read(dir.join("class_001/img_000004.jpg")).unwrap();
        let again = ensure_image_set(&root, &spec).unwrap();
        assert_eq!(dir, again);
        let other = ensure_image_set(&root.join("b"), &spec).unwrap();
        assert_eq!(
            first,
            std::fs::read(other.join("class_001/img_000004.jpg")).unwrap()
        );
        let img = image::open(dir.join("class_001/img_000004.jpg")).unwrap();
        assert_eq!((img.width(), img.height()), (40, 30));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
