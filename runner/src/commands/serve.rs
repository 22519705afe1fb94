//! `stallscope serve [DIR] [--port N]`: serve a directory (an exported site)
//! on 127.0.0.1 with correct MIME types, for a meeting or a quick look.

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The folder to serve.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The port on 127.0.0.1 (0 picks a free one; the URL is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
}

/// Run the server until the process is stopped.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let root = args
        .dir
        .canonicalize()
        .with_context(|| format!("{}: cannot serve it: no such directory", args.dir.display()))?;
    if !root.is_dir() {
        anyhow::bail!("{}: cannot serve it: not a directory", args.dir.display());
    }
    let listener = std::net::TcpListener::bind(("127.0.0.1", args.port))
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
    let port = listener
        .local_addr()
        .context("the listening socket has no address")?
        .port();
    let mut out = std::io::stdout();
    writeln!(
        out,
        "Serving {} at http://127.0.0.1:{port}/ (Ctrl-C stops it)",
        root.display()
    )?;
    out.flush()?;
    // One thread per connection and one request per connection
    // (`Connection: close`): no connection waits behind another's keep-alive.
    // (tiny_http's connection pool could leave a new connection queued behind
    // idle keep-alive ones: a site's bundle then never loaded.)
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let root = root.clone();
        std::thread::spawn(move || {
            // A client that hung up is not the server's problem.
            let _ = answer(&root, stream);
        });
    }
    Ok(ExitCode::SUCCESS)
}

/// Read one request's head and answer it.
fn answer(root: &Path, mut stream: std::net::TcpStream) -> std::io::Result<()> {
    use std::io::Read;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut parts = line.lines().next().unwrap_or("").split(' ');
    let (method, url) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, headers, body) = match (method, respond(root, url)) {
        ("GET" | "HEAD", Reply::File(path, mime)) => match std::fs::read(&path) {
            Ok(bytes) => ("200 OK", vec![("Content-Type", mime.to_string())], bytes),
            Err(_) => not_found(),
        },
        ("GET" | "HEAD", Reply::Redirect(location)) => (
            "301 Moved Permanently",
            vec![("Location", location)],
            Vec::new(),
        ),
        ("GET" | "HEAD", Reply::NotFound) => not_found(),
        _ => (
            "405 Method Not Allowed",
            vec![("Allow", "GET, HEAD".to_string())],
            Vec::new(),
        ),
    };
    let mut reply = format!("HTTP/1.1 {status}\r\n");
    for (k, v) in headers {
        reply += &format!("{k}: {v}\r\n");
    }
    reply += &format!(
        "Content-Length: {}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(reply.as_bytes())?;
    if method != "HEAD" {
        stream.write_all(&body)?;
    }
    stream.flush()?;
    stream.shutdown(std::net::Shutdown::Write)
}

fn not_found() -> (&'static str, Vec<(&'static str, String)>, Vec<u8>) {
    (
        "404 Not Found",
        vec![("Content-Type", "text/plain; charset=utf-8".to_string())],
        b"not found".to_vec(),
    )
}

enum Reply {
    File(PathBuf, &'static str),
    /// A folder asked for without its trailing slash: relative links in
    /// its index.html need the slash.
    Redirect(String),
    NotFound,
}

/// Map a request URL to a file below `root`; never outside it.
fn respond(root: &Path, url: &str) -> Reply {
    let (path, rest) = url.split_at(url.find(['?', '#']).unwrap_or(url.len()));
    if !path.ends_with('/')
        && resolve(root, path).is_some_and(|f| f.ends_with("index.html"))
        && !path.ends_with("index.html")
    {
        return Reply::Redirect(format!("{path}/{rest}"));
    }
    match resolve(root, url) {
        Some(path) => {
            let mime = mime_type(&path);
            Reply::File(path, mime)
        }
        None => Reply::NotFound,
    }
}

pub(crate) fn resolve(root: &Path, url: &str) -> Option<PathBuf> {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let decoded = percent_decode(path)?;
    let mut full = root.to_path_buf();
    for component in Path::new(decoded.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => full.push(part),
            Component::CurDir => {}
            // `..`, a drive prefix or a second root never leave `root`.
            _ => return None,
        }
    }
    if full.is_dir() {
        full.push("index.html");
    }
    full.is_file().then_some(full)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The MIME type by extension; `application/wasm` matters (streaming compile).
pub(crate) fn mime_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "json" => "application/json",
        "css" => "text/css; charset=utf-8",
        "png" => "image/png",
        "svg" => "image/svg+xml",
        "txt" | "md" => "text/plain; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_files_and_refuses_to_leave_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("bundles")).unwrap();
        std::fs::write(dir.join("index.html"), "<!doctype html>").unwrap();
        std::fs::write(dir.join("bundles/a b.json"), "{}").unwrap();
        assert_eq!(resolve(dir, "/"), Some(dir.join("index.html")));
        assert_eq!(resolve(dir, "/?bundle=x#/b"), Some(dir.join("index.html")));
        assert_eq!(
            resolve(dir, "/bundles/a%20b.json"),
            Some(dir.join("bundles/a b.json"))
        );
        assert_eq!(resolve(dir, "/../etc/passwd"), None);
        assert_eq!(resolve(dir, "/bundles/%2e%2e/%2e%2e/x"), None);
        assert_eq!(resolve(dir, "/missing.js"), None);
    }

    #[test]
    fn a_folder_without_its_slash_is_redirected() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("site")).unwrap();
        std::fs::write(dir.join("site/index.html"), "<!doctype html>").unwrap();
        assert!(
            matches!(respond(dir, "/site?bundle=x"), Reply::Redirect(l) if l == "/site/?bundle=x")
        );
        assert!(matches!(respond(dir, "/site/"), Reply::File(..)));
        assert!(matches!(respond(dir, "/site/index.html"), Reply::File(..)));
    }

    #[test]
    fn wasm_gets_its_own_mime_type() {
        assert_eq!(mime_type(Path::new("x_bg.wasm")), "application/wasm");
        assert_eq!(
            mime_type(Path::new("x.js")),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(mime_type(Path::new("index.json")), "application/json");
    }
}
