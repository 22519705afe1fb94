//! The viewer's shared state (loaded bundles, load failures, the current
//! view), provided to every component through `provide_context`.

use std::collections::BTreeMap;
use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;

use crate::route::Route;

/// A bundle that was read and validated.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The bundle's id (unique among loaded bundles; a reload replaces).
    pub key: String,
    /// Where it came from: a file name or a URL.
    pub source: String,
    pub bundle: Arc<Bundle>,
    /// Size of the file in bytes.
    pub bytes: usize,
    /// Milliseconds `read_bundle` took (JSON parse and validation).
    pub parse_ms: f64,
    /// Sidecar files held in memory, by name: those of a format 1.2 merged
    /// bundle compacted on load (`merge::compact`). A 1.3 bundle's are
    /// fetched next to `source` when drawn.
    pub sidecars: Arc<BTreeMap<String, Vec<u8>>>,
}

/// A file that could not be loaded, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadFailure {
    pub id: u64,
    pub source: String,
    pub message: String,
}

/// Everything components share.
#[derive(Clone, Copy)]
pub struct AppState {
    pub bundles: RwSignal<Vec<Loaded>>,
    pub failures: RwSignal<Vec<LoadFailure>>,
    /// Loads in flight (fetches and file reads).
    pub pending: RwSignal<usize>,
    pub route: RwSignal<Route>,
    /// Sidecar files (`*.ssrs`) dropped or picked beside a merged bundle.
    pub dropped_sidecars: RwSignal<BTreeMap<String, Arc<Vec<u8>>>>,
    next_failure: RwSignal<u64>,
}

impl AppState {
    pub fn new(route: Route) -> Self {
        AppState {
            bundles: RwSignal::new(Vec::new()),
            failures: RwSignal::new(Vec::new()),
            pending: RwSignal::new(0),
            route: RwSignal::new(route),
            dropped_sidecars: RwSignal::new(BTreeMap::new()),
            next_failure: RwSignal::new(0),
        }
    }

    /// Add a bundle, replacing one with the same id.
    pub fn add_bundle(&self, loaded: Loaded) {
        self.bundles
            .update(|list| match list.iter_mut().find(|l| l.key == loaded.key) {
                Some(slot) => *slot = loaded,
                None => list.push(loaded),
            });
    }

    /// Record a failure; other bundles stay as they are.
    pub fn add_failure(&self, source: String, message: String) {
        let id = self.next_failure.get_untracked();
        self.next_failure.set(id + 1);
        self.failures.update(|f| {
            f.push(LoadFailure {
                id,
                source,
                message,
            })
        });
    }

    pub fn dismiss_failure(&self, id: u64) {
        self.failures.update(|f| f.retain(|x| x.id != id));
    }

    /// The loaded bundle with this key (tracked).
    pub fn bundle(&self, key: &str) -> Option<Loaded> {
        self.bundles
            .with(|list| list.iter().find(|l| l.key == key).cloned())
    }

    /// Go to a view and put it in the URL.
    pub fn navigate(&self, route: Route) {
        crate::route::write_to_url(&route);
        if self.route.get_untracked() != route {
            self.route.set(route);
        }
    }
}
