//! Where a loader experiment's samples come from: the suite's data plan
//! made into the native loader's [`SourceSpec`] (generating the data sets
//! the suite asks for), with a description for the bundle.

use std::path::Path;

use crate::experiments::UnitError;
use stallscope_core::model_spec::ModelSpec;
use stallscope_core::suite::{DataPlan, LoaderPlan};
use stallscope_loader::generate::{ImageSetSpec, default_cache_root, ensure_image_set};
use stallscope_loader::{ImageSpec, SourceSpec};

/// The native source of `lp` (none for a Python Dataset) and what it is,
/// in words.
pub fn source_spec(
    lp: &LoaderPlan,
    seed: u64,
    data_dir: Option<&Path>,
) -> Result<(Option<SourceSpec>, String), UnitError> {
    let fail = |e: &dyn std::fmt::Display| UnitError::Failed(e.to_string());
    Ok(match (&lp.data, lp.model) {
        (
            DataPlan::Python {
                factory,
                path,
                args,
            },
            _,
        ) => (
            None,
            format!(
                "your Dataset: {factory}({}) with {} first on sys.path",
                serde_json::Value::Object(args.clone()),
                path.display()
            ),
        ),
        (DataPlan::Tensor { samples }, ModelSpec::Linear { features, classes }) => (
            Some(SourceSpec::Tensor {
                samples: *samples,
                features: features as usize,
                classes: classes as usize,
                seed,
            }),
            format!(
                "generated in memory: {samples}×{features} float32 from N(0, 1), labels in 0..{classes} (seed {seed})"
            ),
        ),
        (
            DataPlan::Synthetic {
                samples,
                latency_us,
                cpu_work_rounds,
            },
            ModelSpec::Linear { features, classes },
        ) => (
            Some(SourceSpec::Synthetic {
                samples: *samples,
                features: features as usize,
                classes: classes as usize,
                latency_us: *latency_us,
                cpu_work_rounds: *cpu_work_rounds,
            }),
            format!(
                "synthetic: {samples} samples, {} ms sleep and {cpu_work_rounds} rounds of CPU work per sample",
                *latency_us as f64 / 1000.0
            ),
        ),
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
            let (dir, what) = match dir {
                Some(d) => (d.clone(), format!("image directory {}", d.display())),
                None => {
                    let set = ImageSetSpec {
                        count: *samples,
                        width: *width,
                        height: *height,
                        classes: (classes as usize).min(*samples).clamp(1, 100),
                        seed,
                        quality: 90,
                    };
                    let d = ensure_image_set(&default_cache_root(), &set).map_err(|e| fail(&e))?;
                    (
                        d.clone(),
                        format!(
                            "generated JPEG set: {samples} images of {width}×{height}, quality 90 (seed {seed}), cached in {}",
                            d.display()
                        ),
                    )
                }
            };
            let images = ImageSpec {
                random_crop: *random_crop,
                flip: *flip,
                decoder: *decoder,
                scaled_decode: *scaled_decode,
                ..ImageSpec::new(dir, *resize, size as u32)
            };
            (
                Some(SourceSpec::Images(images)),
                format!(
                    "{what}; decode, resize shorter side to {resize}, {} crop {size}, {}normalise (ImageNet mean/std), NCHW float32",
                    if *random_crop { "random" } else { "centre" },
                    if *flip {
                        "random horizontal flip, "
                    } else {
                        ""
                    }
                ),
            )
        }
        (DataPlan::FashionMnist { dir, samples }, ModelSpec::FashionCnn) => {
            let (dir, what) = match dir.as_deref().or(data_dir) {
                Some(d) => (
                    d.to_path_buf(),
                    format!("FashionMNIST IDX files in {}", d.display()),
                ),
                None => {
                    let d = stallscope_loader::idx::ensure_synthetic_dir(
                        &default_cache_root(),
                        *samples,
                        seed,
                    )
                    .map_err(|e| fail(&e))?;
                    (
                        d.clone(),
                        format!(
                            "generated data of FashionMNIST's shape (no IDX folder given: `dir` or --data-dir), written as IDX files in {} (seed {seed})",
                            d.display()
                        ),
                    )
                }
            };
            (
                Some(SourceSpec::Idx {
                    dir,
                    samples: *samples,
                }),
                format!("{what}: the first {samples} samples, 1×28×28 scaled to [0, 1]"),
            )
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
