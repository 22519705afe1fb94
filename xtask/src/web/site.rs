//! A site for the viewer's checks and benchmark: exported by the real
//! `stallscope site` and served by the real `stallscope serve`.

use crate::cmd::Cmd;
use anyhow::Result;
pub(crate) use stallscope_e2e::Server;
use std::path::{Path, PathBuf};

/// Export a site with the real `stallscope site`.
pub(crate) fn export_site(runner: &Path, bundles: &[PathBuf], out: &Path) -> Result<()> {
    let mut c = Cmd::new(runner).arg("site");
    for b in bundles {
        c = c.arg(b);
    }
    c.arg("--out").arg(out).run()
}
