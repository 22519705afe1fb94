//! Data loading, all in one place: the site's `index.json`, `?bundle=URL`
//! links, dropped and picked files. Every bundle goes through
//! `stallscope_bundle::read_bundle`; a failure is recorded with the file's
//! name and the reader's message, and other loaded bundles stay untouched.
//! A merged bundle's sidecar files are fetched here too, when first drawn.

use std::sync::Arc;

use js_sys::Uint8Array;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::Deserialize;
use stallscope_bundle::merge::{Compacted, compact};
use stallscope_bundle::{MAX_BUNDLE_BYTES, ReadError, read_bundle};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::state::{AppState, Loaded};

/// The site's `index.json` as `stallscope site` writes it.
#[derive(Debug, Deserialize)]
struct SiteIndex {
    kind: String,
    bundles: Vec<SiteEntry>,
}

#[derive(Debug, Deserialize)]
struct SiteEntry {
    file: String,
}

/// Why a fetch failed, in words.
#[derive(Debug)]
enum FetchError {
    /// The server answered 404 (no such file).
    NotFound,
    Other(String),
}

/// Start loading what the page was opened with: `?bundle=URL` links and the
/// site's `index.json` (absent when the viewer is not part of a site).
pub fn load_at_start(state: AppState) {
    for url in bundle_params() {
        load_url(state, url);
    }
    state.pending.update(|n| *n += 1);
    spawn_local(async move {
        match fetch_bytes("index.json").await {
            Ok(bytes) => match serde_json::from_slice::<SiteIndex>(&bytes) {
                Ok(index) if index.kind == "stallscope-site" => {
                    for entry in index.bundles {
                        load_url(state, entry.file);
                    }
                }
                Ok(index) => state.add_failure(
                    "index.json".into(),
                    format!("kind is {:?}; expected \"stallscope-site\" (an index written by `stallscope site`)", index.kind),
                ),
                Err(e) => state.add_failure(
                    "index.json".into(),
                    format!("not a site index at line {}, column {}: {e}", e.line(), e.column()),
                ),
            },
            Err(FetchError::NotFound) => {}
            Err(FetchError::Other(message)) => state.add_failure("index.json".into(), message),
        }
        state.pending.update(|n| *n -= 1);
    });
}

/// The `bundle` parameters of the page's query string.
fn bundle_params() -> Vec<String> {
    let Some(search) = web_sys::window().and_then(|w| w.location().search().ok()) else {
        return Vec::new();
    };
    let Ok(params) = web_sys::UrlSearchParams::new_with_str(&search) else {
        return Vec::new();
    };
    params
        .get_all("bundle")
        .iter()
        .filter_map(|v| v.as_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Fetch a bundle by URL (relative to the page) and add it.
pub fn load_url(state: AppState, url: String) {
    state.pending.update(|n| *n += 1);
    spawn_local(async move {
        match fetch_bytes(&url).await {
            Ok(bytes) => accept(state, url, &bytes),
            Err(FetchError::NotFound) => {
                state.add_failure(url, "the server has no such file (404)".into())
            }
            Err(FetchError::Other(message)) => state.add_failure(url, message),
        }
        state.pending.update(|n| *n -= 1);
    });
}

/// Read dropped or picked files and add each bundle.
pub fn load_files(state: AppState, files: web_sys::FileList) {
    for i in 0..files.length() {
        let Some(file) = files.get(i) else { continue };
        let name = file.name();
        let size = file.size() as usize;
        if name.ends_with(".ssrs") {
            keep_sidecar(state, file, name);
            continue;
        }
        if size > MAX_BUNDLE_BYTES {
            let err = ReadError::TooLarge {
                bytes: size,
                limit: MAX_BUNDLE_BYTES,
            };
            state.add_failure(name, err.to_string());
            continue;
        }
        state.pending.update(|n| *n += 1);
        spawn_local(async move {
            match JsFuture::from(file.array_buffer()).await {
                Ok(buffer) => accept(state, name, &Uint8Array::new(&buffer).to_vec()),
                Err(e) => state.add_failure(
                    name,
                    format!("the browser could not read the file: {}", js_text(&e)),
                ),
            }
            state.pending.update(|n| *n -= 1);
        });
    }
}

/// Hold a dropped sidecar file by name for the merged bundle that names it.
fn keep_sidecar(state: AppState, file: web_sys::File, name: String) {
    state.pending.update(|n| *n += 1);
    spawn_local(async move {
        match JsFuture::from(file.array_buffer()).await {
            Ok(buffer) => {
                let bytes = Arc::new(Uint8Array::new(&buffer).to_vec());
                state.dropped_sidecars.update(|m| {
                    m.insert(name, bytes);
                });
            }
            Err(e) => state.add_failure(
                name,
                format!("the browser could not read the file: {}", js_text(&e)),
            ),
        }
        state.pending.update(|n| *n -= 1);
    });
}

/// Read and validate one bundle's bytes; record it or its failure.
/// A merged bundle of format 1.2 is compacted as `stallscope merge` now
/// writes it (its runs the job's, its steps in sidecars held in memory).
pub fn accept(state: AppState, source: String, bytes: &[u8]) {
    let start = now_ms();
    let result = read_bundle(bytes);
    let parse_ms = now_ms() - start;
    match result {
        Ok(bundle) => {
            let Compacted { bundle, sidecars } = compact(bundle);
            state.add_bundle(Loaded {
                key: bundle.id.clone(),
                source,
                bundle: Arc::new(bundle),
                bytes: bytes.len(),
                parse_ms,
                sidecars: Arc::new(sidecars.into_iter().collect()),
            })
        }
        Err(err) => state.add_failure(source, err.to_string()),
    }
}

/// The URL of a file next to a bundle loaded from `source`.
pub fn beside(source: &str, file: &str) -> String {
    match source.rsplit_once('/') {
        Some((folder, _)) => format!("{folder}/{file}"),
        None => file.to_string(),
    }
}

/// Fetch a sidecar file (at most `limit` bytes), its failure in words.
pub async fn fetch_sidecar(url: &str, limit: usize) -> Result<Vec<u8>, String> {
    match fetch_limited(url, limit).await {
        Ok(b) => Ok(b),
        Err(FetchError::NotFound) => Err(format!(
            "{url}: the server has no such file (404); the sidecar files (*.ssrs) `stallscope \
             merge` wrote belong next to the merged bundle"
        )),
        Err(FetchError::Other(m)) => Err(format!("{url}: {m}")),
    }
}

async fn fetch_bytes(url: &str) -> Result<Vec<u8>, FetchError> {
    fetch_limited(url, MAX_BUNDLE_BYTES).await
}

async fn fetch_limited(url: &str, limit: usize) -> Result<Vec<u8>, FetchError> {
    let window = web_sys::window().ok_or_else(|| FetchError::Other("no window".into()))?;
    let response = JsFuture::from(window.fetch_with_str(url))
        .await
        .map_err(|e| FetchError::Other(format!("could not fetch it: {}", js_text(&e))))?;
    let response: web_sys::Response = response
        .dyn_into()
        .map_err(|_| FetchError::Other("the fetch returned no response".into()))?;
    if response.status() == 404 {
        return Err(FetchError::NotFound);
    }
    if !response.ok() {
        return Err(FetchError::Other(format!(
            "the server answered {} {}",
            response.status(),
            response.status_text()
        )));
    }
    if let Some(len) = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|l| l.parse::<usize>().ok())
        && len > limit
    {
        let err = ReadError::TooLarge { bytes: len, limit };
        return Err(FetchError::Other(err.to_string()));
    }
    let buffer = response
        .array_buffer()
        .map_err(|e| FetchError::Other(js_text(&e)))?;
    let buffer = JsFuture::from(buffer)
        .await
        .map_err(|e| FetchError::Other(format!("the download failed: {}", js_text(&e))))?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// Milliseconds from the page's time origin.
pub fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map(|p| p.now())
        .unwrap_or(0.0)
}

fn js_text(v: &wasm_bindgen::JsValue) -> String {
    v.as_string()
        .or_else(|| {
            v.dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| format!("{v:?}"))
}
