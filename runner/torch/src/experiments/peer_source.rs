//! A loader sweep's source as the peer harness reads it ([`PeerSource`]):
//! the tensor source's very bytes written to files, the image files in the
//! native order, a user's Python Dataset as named. Built once per
//! experiment; a leaf, so the sweep's shared state can hold it.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use stallscope_core::suite::DataPlan;
use stallscope_loader::SourceSpec;

/// The tensor source written for the harness (raw float32 inputs, int64
/// labels), removed when the experiment ends.
pub(crate) struct PeerFiles {
    dir: PathBuf,
    inputs: PathBuf,
    labels: PathBuf,
}

impl Drop for PeerFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write_tensor_files(exp_id: &str, spec: &SourceSpec) -> Result<PeerFiles, String> {
    let SourceSpec::Tensor {
        samples,
        features,
        classes,
        seed,
    } = *spec
    else {
        unreachable!("called for tensor sources")
    };
    let (values, labels) = stallscope_loader::tensor_data(samples, features, classes, seed);
    let dir = std::env::temp_dir().join(format!(
        "stallscope-peers-{}-{}",
        std::process::id(),
        exp_id
    ));
    let fail = |e: std::io::Error| {
        format!(
            "writing the tensor source for the peers into {}: {e}",
            dir.display()
        )
    };
    std::fs::create_dir_all(&dir).map_err(fail)?;
    let files = PeerFiles {
        inputs: dir.join("inputs.f32"),
        labels: dir.join("labels.i64"),
        dir: dir.clone(),
    };
    let mut x = std::io::BufWriter::new(std::fs::File::create(&files.inputs).map_err(fail)?);
    for v in &values {
        x.write_all(&v.to_le_bytes()).map_err(fail)?;
    }
    x.flush().map_err(fail)?;
    let mut y = std::io::BufWriter::new(std::fs::File::create(&files.labels).map_err(fail)?);
    for v in &labels {
        y.write_all(&v.to_le_bytes()).map_err(fail)?;
    }
    y.flush().map_err(fail)?;
    Ok(files)
}

/// The request's `source`, built once per experiment (the tensor files
/// written, the image folder listed) and shared by every peer unit.
pub(crate) struct PeerSource {
    pub(super) json: serde_json::Value,
    /// Removed when the experiment ends.
    _files: Option<PeerFiles>,
}

/// The source of experiment `exp_id` as the harness reads it: the Python
/// Dataset of `data`, else the native loader's `spec`.
pub(super) fn peer_source(
    exp_id: &str,
    data: &DataPlan,
    spec: Option<&SourceSpec>,
) -> Result<PeerSource, String> {
    if let DataPlan::Python {
        factory,
        path,
        args,
    } = data
    {
        return Ok(PeerSource {
            json: json!({
                "kind": "python", "factory": factory,
                "path": [path.display().to_string()], "args": args,
            }),
            _files: None,
        });
    }
    let spec = spec.ok_or("a Python Dataset is read by the pytorch engine only")?;
    let mut files = None;
    let json = match spec {
        SourceSpec::Tensor {
            samples, features, ..
        } => {
            let f = write_tensor_files(exp_id, spec)?;
            let json = json!({
                "kind": "tensor", "inputs": f.inputs, "labels": f.labels,
                "samples": samples, "features": features,
            });
            files = Some(f);
            json
        }
        SourceSpec::Synthetic {
            samples,
            features,
            classes,
            latency_us,
            cpu_work_rounds,
        } => json!({
            "kind": "synthetic", "samples": samples, "features": features,
            "classes": classes, "latency_us": latency_us, "cpu_work_rounds": cpu_work_rounds,
        }),
        SourceSpec::Idx { dir, samples } => json!({
            "kind": "fashionmnist",
            "images": dir.join(stallscope_loader::idx::IMAGES_FILE),
            "labels": dir.join(stallscope_loader::idx::LABELS_FILE),
            "samples": samples,
        }),
        SourceSpec::Images(img) => {
            let src = stallscope_loader::ImageDirSource::open(img).map_err(|e| e.to_string())?;
            let files: Vec<serde_json::Value> = src
                .files()
                .iter()
                .map(|(p, l)| json!([p.display().to_string(), l]))
                .collect();
            json!({
                "kind": "images", "files": files, "resize": img.resize, "crop": img.crop,
                "random_crop": img.random_crop, "flip": img.flip,
            })
        }
    };
    Ok(PeerSource {
        json,
        _files: files,
    })
}
