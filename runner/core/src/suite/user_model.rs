//! The user's own model, `model = "python"` on a loader experiment:
//! `model_factory` and `model_args` checked into a [`PythonModel`], which
//! the harness builds and trains on the user's Dataset (`source =
//! "python"`, the pytorch engine), timed in the same three stages.

use super::kinds::ExperimentCx;
use super::located::SuiteError;
use super::plan::PythonModel;
use super::source::{is_factory, source_name};

/// What the factory may return, for messages.
const RETURNS: &str =
    "a function returning a torch.nn.Module, or (module, loss_fn) or (module, loss_fn, optimizer)";

impl ExperimentCx<'_> {
    /// `model_factory` and `model_args` belong to `model = "python"`.
    pub(super) fn check_model_keys(&self) -> Result<(), SuiteError> {
        let e = self.e;
        let model = e.model.as_ref().map_or("", |m| m.get_ref().as_str());
        if model == "python" {
            return Ok(());
        }
        let stray = [
            ("model_factory", e.model_factory.as_ref().map(|v| v.span())),
            ("model_args", e.model_args.as_ref().map(|v| v.span())),
        ];
        for (key, span) in stray {
            if let Some(span) = span {
                let named = if model.is_empty() {
                    "no model".to_string()
                } else {
                    format!("model = {model:?}")
                };
                return Err(self.cx.err(
                    span,
                    &self.at(key),
                    format!(
                        "given with {named}; it belongs to model = \"python\" (your own model)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// With `model = "python"`, the user's model of a `kind` experiment
    /// (loader or stall); `None` for every other model.
    pub(super) fn python_model(&self, kind: &str) -> Result<Option<PythonModel>, SuiteError> {
        let e = self.e;
        let Some(m) = e.model.as_ref().filter(|m| m.get_ref() == "python") else {
            return Ok(None);
        };
        let at_model = |message: String| self.cx.err(m.span(), &self.at("model"), message);
        if kind == "stall" {
            return Err(at_model(
                "\"python\" in a stall experiment; the differential method runs on the native engine, which cannot run a Python model (model = \"python\" belongs to kind = \"loader\")".into(),
            ));
        }
        let source = source_name(e.loader.as_ref());
        if source != "python" {
            return Err(at_model(format!(
                "\"python\" with source = {source:?}; your own model runs in the Python harness on your own Dataset: expected source = \"python\" (with factory = \"module:function\") in [experiment.loader]"
            )));
        }
        for (key, v) in [
            ("features", &e.features),
            ("classes", &e.classes),
            ("image_size", &e.image_size),
        ] {
            if let Some(v) = v {
                return Err(self.cx.err(
                    v.span(),
                    &self.at(key),
                    "given with model = \"python\"; your factory builds the model (pass its sizes in model_args)",
                ));
            }
        }
        let Some(factory) = &e.model_factory else {
            return Err(self.cx.err(
                m.span(),
                &self.at("model_factory"),
                format!("missing; model = \"python\" needs model_factory = \"module:function\" ({RETURNS})"),
            ));
        };
        if !is_factory(factory.get_ref()) {
            return Err(self.cx.err(
                factory.span(),
                &self.at("model_factory"),
                format!(
                    "{:?}; expected \"module:function\", e.g. \"my_model:make_model\"",
                    factory.get_ref()
                ),
            ));
        }
        Ok(Some(PythonModel {
            factory: factory.get_ref().clone(),
            args: self.model_args()?,
        }))
    }

    /// `model_args` as JSON keyword arguments (none when absent).
    fn model_args(&self) -> Result<serde_json::Map<String, serde_json::Value>, SuiteError> {
        let Some(t) = &self.e.model_args else {
            return Ok(serde_json::Map::new());
        };
        match serde_json::to_value(t.get_ref()) {
            Ok(serde_json::Value::Object(m)) => Ok(m),
            _ => Err(self.cx.err(
                t.span(),
                &self.at("model_args"),
                "cannot be passed to Python; expected a table of numbers, strings, booleans, lists and tables",
            )),
        }
    }
}
