//! The peer engines: PyTorch's DataLoader (`pytorch`), SPDL's pipeline
//! (`spdl`), DALI's CPU pipeline (`dali`) and torchdata.nodes (`nodes`),
//! each hosted by the Python harness in `python/stallscope_peer`, one
//! harness process per unit, started and ended by `stallscope-python`. The
//! harness only measures: it streams raw epochs back (`protocol`) and the
//! runner builds the bundle runs with the same `shared` code as the native
//! loop.
//!
//! `run` follows one unit's harness: `reading` holds the protocol's state
//! machine over its lines, `epoch` turns an epoch line into a run, `ending`
//! judges how the harness ended, and `ranks` is what the other ranks of a
//! ranked run change in all that; `timeline` samples the harness's tree.

mod ending;
mod engines;
mod epoch;
mod protocol;
mod ranks;
mod reading;
mod run;
mod timeline;
mod unit;

use std::path::Path;

use serde_json::json;

use stallscope_bundle::Run;
use stallscope_core::{ModelSpec, UnitError, suite::PythonModel};

pub use engines::available;
pub use protocol::{DistRequest, Hello, LoaderRequest, PROTOCOL, Request};
pub use unit::PeerUnit;

/// Run one unit in a fresh harness process.
pub fn run_unit(u: &PeerUnit) -> Result<Vec<Run>, UnitError> {
    run::run(u)
}

/// The model as the request names it.
pub fn model_json(model: ModelSpec, loader_only: bool) -> serde_json::Value {
    if loader_only {
        return json!({"name": "none"});
    }
    match model {
        ModelSpec::FashionCnn => json!({"name": "fashion_cnn"}),
        ModelSpec::Linear { features, classes } => {
            json!({"name": "linear", "features": features, "classes": classes})
        }
        ModelSpec::ImageCnn { size, classes } => {
            json!({"name": "image_cnn", "size": size, "classes": classes})
        }
    }
}

/// The user's own model (`model = "python"`) as the request names it:
/// its factory, imported with `path` first on `sys.path`, called with its
/// arguments.
pub fn python_model_json(m: &PythonModel, path: &Path) -> serde_json::Value {
    json!({
        "name": "python", "factory": m.factory,
        "path": [path.display().to_string()], "args": m.args,
    })
}

/// The optimizer the native loop uses with `model`.
pub fn optimizer_json(model: ModelSpec) -> serde_json::Value {
    let o = model.default_optimizer();
    json!({"name": o.name(), "lr": o.lr()})
}
