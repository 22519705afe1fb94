//! The peer engines, `pytorch` (torch.utils.data.DataLoader) and `spdl`
//! (SPDL's pipeline), hosted by the Python harness in `python/`. The
//! harness only measures: it streams raw epochs back (protocol.rs) and the
//! runner builds the bundle runs with the same code as the native loop.

pub mod child;
pub mod harness;
pub mod protocol;
pub mod python;
pub mod timeline;

use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;

use serde_json::json;

use stallscope_bundle::Run;
use stallscope_core::driver::{Progress, UnitError};
use stallscope_core::model_spec::ModelSpec;
use stallscope_core::suite::{EngineName, PythonModel};

pub use protocol::{Hello, LoaderRequest, Request};

/// One unit of a peer configuration.
pub struct PeerUnit<'a> {
    pub engine: EngineName,
    pub exp_id: &'a str,
    pub config_id: &'a str,
    pub repeat: u32,
    pub request: Request,
    /// The native model's parameter count; the harness must build the same
    /// (for a user's model: what the experiment's first hello reported).
    pub expected_parameters: Option<u64>,
    /// Where the first hello of the experiment is kept, when the runner
    /// learns the model from the harness (a user's own model).
    pub first_hello: Option<&'a OnceLock<Hello>>,
    pub stop: &'a AtomicBool,
    pub progress: &'a dyn Progress,
}

/// Run one unit in a fresh harness process.
pub fn run_unit(u: &PeerUnit) -> Result<Vec<Run>, UnitError> {
    child::run(u)
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
