//! A small WebDriver client for headless Chromium: starts Debian's
//! `chromedriver` (the flags of toolchain.md) and speaks the W3C WebDriver
//! protocol to it on 127.0.0.1 through `ureq` — navigate, run a script,
//! screenshot, alerts, file inputs, Chrome DevTools commands.
use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde_json::{Value, json};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's Chromium (`cargo xtask setup` installs it).
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's ChromeDriver (package `chromium-driver`).
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long one WebDriver command may take (a slow page load included).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest answer read (a full-page screenshot in base64 stays far below).
const MAX_ANSWER_BYTES: u64 = 512 << 20;

/// A running chromedriver with one browser session; both end on drop.
pub struct Browser {
    driver: Child,
    http: ureq::Agent,
    base: String,
    session: String,
    _profile: tempfile::TempDir,
}

/// The first of Chromium and ChromeDriver that is not installed, with what to run.
pub fn missing() -> Option<String> {
    [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .find(|p| !Path::new(p).exists())
        .map(|p| {
            format!(
                "{p} is missing: run `cargo xtask setup` (it installs Debian's chromium and chromium-driver)"
            )
        })
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("cannot bind a local port")?;
    Ok(l.local_addr()?.port())
}

impl Browser {
    /// Start chromedriver and a headless Chromium of `width`×`height` CSS pixels.
    pub fn start(width: u32, height: u32) -> Result<Browser> {
        if let Some(why) = missing() {
            bail!(why);
        }
        let port = free_port()?;
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start chromedriver")?;
        let http = ureq::Agent::config_builder()
            // WebDriver errors come as 4xx/5xx with a JSON body: read it.
            .http_status_as_error(false)
            // chromedriver is on 127.0.0.1: never through an HTTP proxy.
            .proxy(None)
            .timeout_global(Some(COMMAND_TIMEOUT))
            .build()
            .new_agent();
        let profile = tempfile::Builder::new()
            .prefix("stallscope-chromium-")
            .tempdir()
            .context("cannot create a Chromium profile folder")?;
        let mut browser = Browser {
            driver,
            http,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            _profile: profile,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while browser.request("GET", "/status", None).is_err() {
            if Instant::now() > deadline {
                bail!("chromedriver did not answer on port {port} within 20 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            format!("--user-data-dir={}", browser._profile.path().display()),
            format!("--window-size={width},{height}"),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args}
        }}});
        let v = browser
            .request("POST", "/session", Some(caps))
            .context("cannot start a Chromium session")?;
        browser.session = v["sessionId"]
            .as_str()
            .context("chromedriver returned no session id")?
            .to_string();
        Ok(browser)
    }

    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Open a URL and wait for the document to load.
    pub fn goto(&self, url: &str) -> Result<()> {
        self.request("POST", &self.path("/url"), Some(json!({ "url": url })))
            .with_context(|| format!("cannot open {url}"))?;
        Ok(())
    }

    /// Run a script (a function body; `arguments` holds `args`) and return its value.
    pub fn eval(&self, script: &str, args: Value) -> Result<Value> {
        self.request(
            "POST",
            &self.path("/execute/sync"),
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Run an asynchronous script (it calls its last argument with the result).
    pub fn eval_async(&self, script: &str, args: Value) -> Result<Value> {
        self.request(
            "POST",
            &self.path("/execute/async"),
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Poll a script until it returns something truthy; return that value.
    pub fn wait_for(&self, what: &str, script: &str, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(script, json!([]))?;
            let truthy =
                !matches!(v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return Ok(v);
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {:.0} s waiting for {what}",
                    timeout.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A Chrome DevTools Protocol command through chromedriver.
    pub fn cdp(&self, cmd: &str, params: Value) -> Result<Value> {
        self.request(
            "POST",
            &self.path("/goog/cdp/execute"),
            Some(json!({ "cmd": cmd, "params": params })),
        )
    }

    /// The text of an open alert, if one is open.
    pub fn alert_text(&self) -> Option<String> {
        self.request("GET", &self.path("/alert/text"), None)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
    }

    /// Type a file path into a file input (what a person picking a file does).
    pub fn pick_file(&self, css: &str, file: &Path) -> Result<()> {
        let el = self.request(
            "POST",
            &self.path("/element"),
            Some(json!({"using": "css selector", "value": css})),
        )?;
        let id = el
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .with_context(|| format!("no element {css}"))?
            .to_string();
        self.request(
            "POST",
            &self.path(&format!("/element/{id}/value")),
            Some(json!({"text": file.display().to_string()})),
        )?;
        Ok(())
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self, file: &Path) -> Result<()> {
        let v = self.request("GET", &self.path("/screenshot"), None)?;
        let text = v.as_str().context("the screenshot is not text")?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(text)
            .context("the screenshot is not base64")?;
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(file, png).with_context(|| format!("cannot write {}", file.display()))
    }

    /// One WebDriver command; the `value` of the answer, or its error.
    fn request(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let sent = match (method, body) {
            ("GET", None) => self.http.get(&url).call(),
            ("DELETE", None) => self.http.delete(&url).call(),
            ("POST", body) => self
                .http
                .post(&url)
                .header("Content-Type", "application/json")
                .send(body.unwrap_or_else(|| json!({})).to_string()),
            (m, _) => bail!("unsupported WebDriver request {m} {path}"),
        };
        let mut answer = sent.with_context(|| format!("WebDriver {method} {path}"))?;
        let bytes = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec()
            .with_context(|| format!("cannot read chromedriver's answer to {method} {path}"))?;
        let v: Value = serde_json::from_slice(&bytes)
            .with_context(|| format!("chromedriver's answer to {method} {path} is not JSON"))?;
        let value = v.get("value").cloned().unwrap_or(Value::Null);
        if let Some(err) = value.get("error").and_then(Value::as_str) {
            let msg = value.get("message").and_then(Value::as_str).unwrap_or("");
            let first = msg.lines().next().unwrap_or("");
            bail!("WebDriver {method} {path}: {err}: {first}");
        }
        Ok(value)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.request("DELETE", &self.path(""), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
