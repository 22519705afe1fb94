//! Where a loader experiment's samples come from: the suite's data plan
//! made into the native loader's [`SourceSpec`] (generating the data sets
//! the suite asks for), with a description for the bundle.

use std::path::{Path, PathBuf};

use stallscope_core::{
    ModelSpec, UnitError,
    suite::{DataPlan, LoaderPlan},
};
use stallscope_loader::{
    ImageSetSpec, ImageSpec, SourceSpec, default_cache_root, ensure_image_set,
};

/// A native source (none for a Python Dataset) and what it is, in words.
type Source = (Option<SourceSpec>, String);

/// The native source of `lp` (none for a Python Dataset) and what it is,
/// in words.
pub fn source_spec(
    lp: &LoaderPlan,
    seed: u64,
    data_dir: Option<&Path>,
) -> Result<Source, UnitError> {
    Ok(match (&lp.data, lp.model) {
        (
            DataPlan::Python {
                factory,
                path,
                args,
            },
            _,
        ) => python(factory, path, args),
        (&DataPlan::Tensor { samples }, ModelSpec::Linear { features, classes }) => {
            tensor(samples, features, classes, seed)
        }
        (
            &DataPlan::Synthetic {
                samples,
                latency_us,
                cpu_work_rounds,
            },
            ModelSpec::Linear { features, classes },
        ) => synthetic(samples, features, classes, latency_us, cpu_work_rounds),
        (
            DataPlan::Images {
                dir,
                samples,
                width,
                height,
                resize,
                flip,
                random_crop,
                decoder,
                scaled_decode,
            },
            ModelSpec::ImageCnn { size, classes },
        ) => {
            let (dir, what) =
                image_dir(dir.as_deref(), *samples, (*width, *height), classes, seed)?;
            let images = ImageSpec {
                random_crop: *random_crop,
                flip: *flip,
                decoder: *decoder,
                scaled_decode: *scaled_decode,
                ..ImageSpec::new(dir, *resize, size as u32)
            };
            images_source(images, &what, size)
        }
        (DataPlan::FashionMnist { dir, samples }, ModelSpec::FashionCnn) => {
            fashion_mnist(dir.as_deref().or(data_dir), *samples, seed)?
        }
        (d, m) => {
            return Err(UnitError::Failed(format!(
                "source {} does not fit model {}",
                d.name(),
                m.name()
            )));
        }
    })
}

fn fail(e: &dyn std::fmt::Display) -> UnitError {
    UnitError::Failed(e.to_string())
}

/// A user's Dataset: no native source, the factory in words.
fn python(factory: &str, path: &Path, args: &serde_json::Map<String, serde_json::Value>) -> Source {
    (
        None,
        format!(
            "your Dataset: {factory}({}) with {} first on sys.path",
            serde_json::Value::Object(args.clone()),
            path.display()
        ),
    )
}

/// seeds/000 tensors for the linear model, generated in memory.
fn tensor(samples: usize, features: i64, classes: i64, seed: u64) -> Source {
    (
        Some(SourceSpec::Tensor {
            samples,
            features: features as usize,
            classes: classes as usize,
            seed,
        }),
        format!(
            "generated in memory: {samples}×{features} float32 from N(0, 1), labels in 0..{classes} (seed {seed})"
        ),
    )
}

/// A fixed cost per sample for the linear model: a sleep and CPU work.
fn synthetic(
    samples: usize,
    features: i64,
    classes: i64,
    latency_us: u64,
    cpu_work_rounds: u64,
) -> Source {
    (
        Some(SourceSpec::Synthetic {
            samples,
            features: features as usize,
            classes: classes as usize,
            latency_us,
            cpu_work_rounds,
        }),
        format!(
            "synthetic: {samples} samples, {} ms sleep and {cpu_work_rounds} rounds of CPU work per sample",
            latency_us as f64 / 1000.0
        ),
    )
}

/// The image directory given, or else a generated JPEG set of `samples`
/// images of `width × height` (once, in the cache); with what it is, in
/// words.
fn image_dir(
    dir: Option<&Path>,
    samples: usize,
    (width, height): (u32, u32),
    classes: i64,
    seed: u64,
) -> Result<(PathBuf, String), UnitError> {
    if let Some(d) = dir {
        return Ok((d.to_path_buf(), format!("image directory {}", d.display())));
    }
    let set = ImageSetSpec {
        count: samples,
        width,
        height,
        classes: (classes as usize).min(samples).clamp(1, 100),
        seed,
        quality: 90,
    };
    let d = ensure_image_set(&default_cache_root(), &set).map_err(|e| fail(&e))?;
    let what = format!(
        "generated JPEG set: {samples} images of {width}×{height}, quality 90 (seed {seed}), cached in {}",
        d.display()
    );
    Ok((d, what))
}

/// The image pipeline `images` over the folder `what` describes, cropping
/// to `size`.
fn images_source(images: ImageSpec, what: &str, size: i64) -> Source {
    let description = format!(
        "{what}; decode, resize shorter side to {}, {} crop {size}, {}normalise (ImageNet mean/std), NCHW float32",
        images.resize,
        if images.random_crop {
            "random"
        } else {
            "centre"
        },
        if images.flip {
            "random horizontal flip, "
        } else {
            ""
        }
    );
    (Some(SourceSpec::Images(images)), description)
}

/// FashionMNIST's IDX files from `dir`, or else a generated stand-in of the
/// same shape written as IDX files (once, in the cache).
fn fashion_mnist(dir: Option<&Path>, samples: usize, seed: u64) -> Result<Source, UnitError> {
    let (dir, what) = match dir {
        Some(d) => (
            d.to_path_buf(),
            format!("FashionMNIST IDX files in {}", d.display()),
        ),
        None => {
            let d =
                stallscope_loader::idx::ensure_synthetic_dir(&default_cache_root(), samples, seed)
                    .map_err(|e| fail(&e))?;
            let what = format!(
                "generated data of FashionMNIST's shape (no IDX folder given: `dir` or --data-dir), written as IDX files in {} (seed {seed})",
                d.display()
            );
            (d, what)
        }
    };
    Ok((
        Some(SourceSpec::Idx { dir, samples }),
        format!("{what}: the first {samples} samples, 1×28×28 scaled to [0, 1]"),
    ))
}
