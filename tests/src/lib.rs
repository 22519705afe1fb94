//! The workspace's end-to-end test support, shared with `xtask`'s browser
//! checks: the WebDriver client for headless Chromium ([`webdriver`]), a
//! `stallscope serve` that lives as long as a value ([`Server`]), and where
//! the workspace's own binaries were built ([`target_binary`]). The test
//! itself is `tests/site_in_chromium.rs`.
pub mod webdriver;

use anyhow::{Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Set to `0` to skip the browser end-to-end test (it says so when skipped).
pub const E2E_ENV: &str = "STALLSCOPE_E2E";

/// True when [`E2E_ENV`] is set to `0`: the caller skips, saying so.
pub fn skipped_by_env() -> bool {
    std::env::var_os(E2E_ENV).is_some_and(|v| v == "0")
}

/// `target/<profile>/NAME` beside the running test (cargo puts test
/// executables in `target/<profile>/deps/`), for a binary of another
/// package, which has no `CARGO_BIN_EXE_`. The error names the command that
/// builds it.
pub fn target_binary(name: &str, package: &str) -> Result<PathBuf, String> {
    let tried = match stallscope_loader::beside_running_program(name)? {
        Ok(found) => return Ok(found),
        Err(tried) => tried,
    };
    Err(format!(
        "the {name} binary was not found (looked at {}): build it first with \
         `cargo build -p {package}` (plain `cargo test` and `cargo xtask test` build it)",
        tried.join(", ")
    ))
}

/// `stallscope serve DIR --port 0`, running until dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT/`
    pub url: String,
}

impl Server {
    /// Start `RUNNER serve DIR` on a free 127.0.0.1 port and read its URL.
    pub fn start(runner: &Path, dir: &Path) -> Result<Server> {
        let mut child = Command::new(runner)
            .arg("serve")
            .arg(dir)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {} serve", runner.display()))?;
        let stdout = child
            .stdout
            .take()
            .context("no stdout from stallscope serve")?;
        let mut server = Server {
            child,
            url: String::new(),
        };
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        // Keep reading, so the server never writes into a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        server.url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .with_context(|| format!("stallscope serve printed no URL: {line:?}"))?
            .to_string();
        Ok(server)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
