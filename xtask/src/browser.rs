//! A small WebDriver client for the browser tests and the viewer benchmark:
//! starts Debian's `chromedriver` with headless Chromium (the flags of
//! toolchain.md) and speaks the W3C WebDriver protocol over plain HTTP on
//! 127.0.0.1 — navigate, run a script, screenshot, alerts, file inputs.
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A running chromedriver with one browser session; both end on drop.
pub(crate) struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: TempDir,
}

/// A folder removed on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(prefix: &str) -> Result<TempDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free TCP port on 127.0.0.1.
pub(crate) fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("cannot bind a local port")?;
    Ok(l.local_addr()?.port())
}

impl Browser {
    /// Start chromedriver and a headless Chromium of `width`×`height` CSS pixels.
    pub(crate) fn start(width: u32, height: u32) -> Result<Browser> {
        for path in [CHROMIUM, CHROMEDRIVER] {
            if !Path::new(path).exists() {
                bail!(
                    "{path} is missing: run `cargo xtask setup` (it installs Debian's chromium and chromium-driver)"
                );
            }
        }
        let port = free_port()?;
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start chromedriver")?;
        let profile = TempDir::new("stallscope-chromium")?;
        let mut browser = Browser {
            driver,
            port,
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
            format!("--user-data-dir={}", browser._profile.0.display()),
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
    pub(crate) fn goto(&self, url: &str) -> Result<()> {
        self.request("POST", &self.path("/url"), Some(json!({ "url": url })))
            .with_context(|| format!("cannot open {url}"))?;
        Ok(())
    }

    /// Run a script (a function body; `arguments` holds `args`) and return its value.
    pub(crate) fn eval(&self, script: &str, args: Value) -> Result<Value> {
        self.request(
            "POST",
            &self.path("/execute/sync"),
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Run an asynchronous script (it calls its last argument with the result).
    pub(crate) fn eval_async(&self, script: &str, args: Value) -> Result<Value> {
        self.request(
            "POST",
            &self.path("/execute/async"),
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Poll a script until it returns something truthy; return that value.
    pub(crate) fn wait_for(&self, what: &str, script: &str, timeout: Duration) -> Result<Value> {
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
    pub(crate) fn cdp(&self, cmd: &str, params: Value) -> Result<Value> {
        self.request(
            "POST",
            &self.path("/goog/cdp/execute"),
            Some(json!({ "cmd": cmd, "params": params })),
        )
    }

    /// The text of an open alert, if one is open.
    pub(crate) fn alert_text(&self) -> Option<String> {
        self.request("GET", &self.path("/alert/text"), None)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
    }

    /// Type a file path into a file input (what a person picking a file does).
    pub(crate) fn pick_file(&self, css: &str, file: &Path) -> Result<()> {
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
    pub(crate) fn screenshot(&self, file: &Path) -> Result<()> {
        let v = self.request("GET", &self.path("/screenshot"), None)?;
        let png = decode_base64(v.as_str().context("the screenshot is not text")?)?;
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(file, png).with_context(|| format!("cannot write {}", file.display()))
    }

    /// One WebDriver command; the `value` of the answer, or its error.
    fn request(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        )?;
        // chromedriver keeps the connection open: read the header, then
        // exactly Content-Length bytes (or chunks up to the last one).
        let mut raw = Vec::new();
        let mut buf = [0u8; 65536];
        let split = loop {
            if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let n = stream.read(&mut buf)?;
            if n == 0 {
                bail!("chromedriver closed the connection before its answer to {method} {path}");
            }
            raw.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
        let mut payload = raw[split + 4..].to_vec();
        let length = head.lines().find_map(|l| {
            l.strip_prefix("content-length:")
                .and_then(|v| v.trim().parse::<usize>().ok())
        });
        let chunked = head.contains("transfer-encoding: chunked")
            || head.contains("transfer-encoding:chunked");
        loop {
            let complete = match length {
                Some(len) => payload.len() >= len,
                None if chunked => payload.ends_with(b"0\r\n\r\n"),
                None => false,
            };
            if complete {
                break;
            }
            let n = stream.read(&mut buf)?;
            if n == 0 {
                break;
            }
            payload.extend_from_slice(&buf[..n]);
        }
        if chunked {
            payload = dechunk(&payload)?;
        }
        let v: Value = serde_json::from_slice(&payload)
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

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("bad chunk")?;
        let size = usize::from_str_radix(String::from_utf8_lossy(&data[..line_end]).trim(), 16)?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(data.get(..size).context("short chunk")?);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

/// Standard base64 (the screenshot encoding).
pub(crate) fn decode_base64(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\n' | b'\r' => continue,
            _ => bail!("not base64: byte {c}"),
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes() {
        assert_eq!(decode_base64("aGVsbG8gd29ybGQ=").unwrap(), b"hello world");
        assert_eq!(decode_base64("iVBORw0KGgo=").unwrap(), b"\x89PNG\r\n\x1a\n");
        assert!(decode_base64("a*b").is_err());
    }

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            dechunk(b"4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n").unwrap(),
            b"Wikipedia"
        );
    }
}
