//! The view as a URL hash (`#/b/ID/e/EXP?baseline=..&sort=..`), so a link
//! reopens the same view; parsing and writing both live here.

use std::collections::BTreeMap;

/// The sort order of the comparison table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sort {
    /// Column index; `None` sorts by configuration (the bundle's order).
    pub column: Option<usize>,
    pub descending: bool,
}

/// What the experiment page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentView {
    pub bundle: String,
    pub experiment: String,
    /// Baseline configuration id picked by the reader.
    pub baseline: Option<String>,
    pub sort: Sort,
    /// Configuration whose per-step distribution is drawn.
    pub steps_of: Option<String>,
}

/// Every view of the viewer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Library,
    Bundle {
        bundle: String,
    },
    Experiment(ExperimentView),
    Compare {
        bundles: Vec<String>,
        experiment: Option<String>,
    },
    HowTo {
        bundle: String,
    },
}

impl ExperimentView {
    pub fn new(bundle: &str, experiment: &str) -> Self {
        ExperimentView {
            bundle: bundle.to_string(),
            experiment: experiment.to_string(),
            baseline: None,
            sort: Sort::default(),
            steps_of: None,
        }
    }
}

impl Route {
    /// The hash for this view (with the leading `#`).
    pub fn to_hash(&self) -> String {
        let mut query: Vec<(&str, String)> = Vec::new();
        let path = match self {
            Route::Library => "/".to_string(),
            Route::Bundle { bundle } => format!("/b/{}", enc(bundle)),
            Route::HowTo { bundle } => format!("/how/{}", enc(bundle)),
            Route::Experiment(v) => {
                if let Some(b) = &v.baseline {
                    query.push(("baseline", b.clone()));
                }
                if let Some(c) = v.sort.column {
                    query.push(("sort", c.to_string()));
                    if v.sort.descending {
                        query.push(("desc", "1".into()));
                    }
                }
                if let Some(s) = &v.steps_of {
                    query.push(("steps", s.clone()));
                }
                format!("/b/{}/e/{}", enc(&v.bundle), enc(&v.experiment))
            }
            Route::Compare {
                bundles,
                experiment,
            } => {
                if let Some(e) = experiment {
                    query.push(("e", e.clone()));
                }
                let ids: Vec<String> = bundles.iter().map(|b| enc(b)).collect();
                format!("/compare/{}", ids.join("/"))
            }
        };
        let mut hash = format!("#{path}");
        if !query.is_empty() {
            let q: Vec<String> = query
                .iter()
                .map(|(k, v)| format!("{k}={}", enc(v)))
                .collect();
            hash.push('?');
            hash.push_str(&q.join("&"));
        }
        hash
    }

    /// Parse a hash (with or without the leading `#`); unknown shapes give the library.
    pub fn from_hash(hash: &str) -> Route {
        let hash = hash.strip_prefix('#').unwrap_or(hash);
        let (path, query) = hash.split_once('?').unwrap_or((hash, ""));
        let query: BTreeMap<String, String> = query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_string(), dec(v)?)))
            .collect();
        let parts: Vec<String> = path
            .split('/')
            .filter(|p| !p.is_empty())
            .map(|p| dec(p).unwrap_or_default())
            .collect();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        match parts.as_slice() {
            ["b", bundle] => Route::Bundle {
                bundle: bundle.to_string(),
            },
            ["how", bundle] => Route::HowTo {
                bundle: bundle.to_string(),
            },
            ["b", bundle, "e", experiment] => Route::Experiment(ExperimentView {
                bundle: bundle.to_string(),
                experiment: experiment.to_string(),
                baseline: query.get("baseline").cloned(),
                sort: Sort {
                    column: query.get("sort").and_then(|s| s.parse().ok()),
                    descending: query.get("desc").is_some_and(|d| d == "1"),
                },
                steps_of: query.get("steps").cloned(),
            }),
            ["compare", rest @ ..] if !rest.is_empty() => Route::Compare {
                bundles: rest.iter().map(|s| s.to_string()).collect(),
                experiment: query.get("e").cloned(),
            },
            _ => Route::Library,
        }
    }
}

/// Percent-encode everything but unreserved characters (RFC 3986).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn dec(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The view in the page's current URL.
pub fn read_from_url() -> Route {
    let hash = web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default();
    Route::from_hash(&hash)
}

/// Put the view in the URL (a new history entry when it changed).
pub fn write_to_url(route: &Route) {
    let Some(window) = web_sys::window() else {
        return;
    };
    let hash = route.to_hash();
    if window.location().hash().ok().as_deref() != Some(hash.as_str()) {
        let _ = window.location().set_hash(&hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_view_survives_the_url() {
        let routes = [
            Route::Library,
            Route::Bundle {
                bundle: "2026-11-30T10:00Z/ab c".into(),
            },
            Route::HowTo { bundle: "x".into() },
            Route::Experiment(ExperimentView {
                bundle: "fashion".into(),
                experiment: "batch sweep".into(),
                baseline: Some("bs=256&x".into()),
                sort: Sort {
                    column: Some(2),
                    descending: true,
                },
                steps_of: Some("c1".into()),
            }),
            Route::Compare {
                bundles: vec!["a".into(), "b/c".into()],
                experiment: Some("e1".into()),
            },
        ];
        for r in routes {
            assert_eq!(Route::from_hash(&r.to_hash()), r, "{}", r.to_hash());
        }
    }

    #[test]
    fn unknown_hashes_open_the_library() {
        assert_eq!(Route::from_hash(""), Route::Library);
        assert_eq!(Route::from_hash("#/nope/x/y/z"), Route::Library);
    }
}
