//! The image source: a directory of JPEG/PNG files (labels from class
//! sub-folders), each read, then decoded, resized, cropped, flipped and
//! normalised to CHW by [`super::pipeline`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::image_spec::ImageSpec;
use super::jpeg::Turbo;
use super::pipeline::{self, Failed};
use super::rng::Rng;
use super::sample::{SampleError, Source, SourceOpenError};
use super::stats::{Stage, StageTimes};

/// The files of an image directory and their labels.
pub struct ImageDirSource {
    spec: ImageSpec,
    files: Vec<(PathBuf, i64)>,
    turbo: Option<&'static Turbo>,
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
        let turbo = pipeline::resolve(spec.decoder).map_err(err)?;
        Ok(ImageDirSource {
            spec: spec.clone(),
            files,
            turbo,
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

    /// Sample `index` could not be used, at `stage`.
    fn bad(&self, index: u64, stage: Stage, message: String) -> SampleError {
        SampleError {
            index,
            path: Some(self.files[index as usize].0.display().to_string()),
            message,
            stage,
        }
    }

    /// [`Source::load`] without the stage clocks (the bare per-image
    /// function the bench measures the loader against).
    pub fn load_untimed(
        &self,
        index: u64,
        rng: &mut Rng,
        out: &mut [f32],
    ) -> Result<i64, SampleError> {
        let (path, label) = &self.files[index as usize];
        let bad = |stage: Stage, message: String| self.bad(index, stage, message);
        let bytes =
            std::fs::read(path).map_err(|e| bad(Stage::Read, format!("cannot read: {e}")))?;
        match pipeline::run(&self.spec, self.turbo, &bytes, rng, out, &mut || {}) {
            Ok(()) => Ok(*label),
            Err(Failed::Decode(m)) => Err(bad(Stage::Decode, m)),
            Err(Failed::Transform(m)) => Err(bad(Stage::Transform, m)),
        }
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
    fn describe(&self) -> Option<String> {
        let first = std::fs::read(&self.files[0].0).ok();
        Some(
            pipeline::describe(&self.spec, first.as_deref())
                .unwrap_or_else(|e| format!("decoder not available: {e}")),
        )
    }
    fn load(
        &self,
        index: u64,
        rng: &mut Rng,
        out: &mut [f32],
        times: &mut StageTimes,
    ) -> Result<i64, SampleError> {
        let (path, label) = &self.files[index as usize];
        let bad = |stage: Stage, message: String| self.bad(index, stage, message);
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
        let mut decode_end = None;
        let result = pipeline::run(&self.spec, self.turbo, &bytes, rng, out, &mut || {
            decode_end = Some(Instant::now())
        });
        let end = Instant::now();
        let split = decode_end.unwrap_or(end);
        match result {
            Ok(()) => {
                times.add(Stage::Decode, split - start);
                times.add(Stage::Transform, end - split);
                Ok(*label)
            }
            Err(Failed::Decode(m)) => {
                times.fail(Stage::Decode, end - start);
                Err(bad(Stage::Decode, m))
            }
            Err(Failed::Transform(m)) => {
                times.add(Stage::Decode, split - start);
                times.fail(Stage::Transform, end - split);
                Err(bad(Stage::Transform, m))
            }
        }
    }
}
