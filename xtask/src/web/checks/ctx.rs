//! What every browser check shares: the context (the browser, the site's
//! URL, the fixtures' ids), the pages' readiness scripts and the helpers
//! that open a page, read text and take a screenshot.

pub(super) use anyhow::{Context, Result, bail};
pub(super) use serde_json::{Value, json};
pub(super) use stallscope_e2e::webdriver::Browser;
pub(super) use std::path::{Path, PathBuf};
pub(super) use std::time::Duration;

pub(super) const PUBLISHED: &str = "fixtures/published/fashionmnist-batch-sweep.json";
pub(super) const MEASURED: &str = "fixtures/measured/cpu-quickstart-quick.json";
pub(super) const XSS_TITLE: &str = "<img src=x onerror=alert(1)>";
pub(super) const XSS_ID: &str = "xss-title-test";
pub(super) const STEPS_ID: &str = "generated-steps-test";
pub(super) const SITE_BUNDLES: usize = 12;
pub(super) const WAIT: Duration = Duration::from_secs(20);

/// Everything a check needs.
pub(super) struct Ctx {
    pub(super) browser: Browser,
    pub(super) url: String,
    pub(super) published: Value,
    pub(super) published_id: String,
    pub(super) measured_id: String,
    pub(super) shots: PathBuf,
    pub(super) repo: PathBuf,
}

/// JS: the page finished loading its bundles.
pub(super) const LOADED: &str = "return !document.querySelector('.pending') && document.querySelectorAll('.bundle-row, .bundle-title, .experiment-title, .compare-view, .how-to-read').length > 0;";
/// JS: the experiment page's table is there and every chart is drawn.
pub(super) const EXPERIMENT_READY: &str = "const c=[...document.querySelectorAll('canvas.chart-canvas')]; return !!document.querySelector('.comparison-table') && c.length>0 && c.every(x=>x.dataset.drawn==='1');";

pub(super) fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", path.display()))
}

impl Ctx {
    pub(super) fn open(&self, hash: &str) -> Result<()> {
        self.browser.goto(&format!("{}{hash}", self.url))?;
        self.browser.wait_for("the bundles to load", LOADED, WAIT)?;
        Ok(())
    }

    pub(super) fn open_experiment(&self, bundle: &str, experiment: &str) -> Result<()> {
        self.open(&format!("#/b/{bundle}/e/{experiment}"))?;
        self.browser
            .wait_for("the experiment page to render", EXPERIMENT_READY, WAIT)?;
        Ok(())
    }

    pub(super) fn text(&self, css: &str) -> Result<String> {
        let v = self.browser.eval(
            "const e=document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([css]),
        )?;
        v.as_str()
            .map(str::to_string)
            .with_context(|| format!("no element matches {css}"))
    }

    pub(super) fn shot(&self, name: &str) -> Result<()> {
        self.browser
            .screenshot(&self.shots.join(format!("{name}.png")))
    }

    /// The `data-col` of the table column whose heading starts with `prefix`.
    pub(super) fn column(&self, prefix: &str) -> Result<String> {
        let v = self.browser.eval(
            "const h=[...document.querySelectorAll('.comparison-table th[data-col]')].find(t=>t.textContent.startsWith(arguments[0])); return h ? h.dataset.col : null;",
            json!([prefix]),
        )?;
        v.as_str()
            .map(str::to_string)
            .with_context(|| format!("no column heading starts with {prefix:?}"))
    }
}
