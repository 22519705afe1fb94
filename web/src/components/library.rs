//! The library: every loaded bundle, with a way into each and a way to put
//! two or more side by side.

use leptos::prelude::*;
use stallscope_bundle::analysis::{bundle_title, show_bytes, show_created};

use crate::components::provenance::Provenance;
use crate::route::Route;
use crate::state::{AppState, Loaded};

#[component]
pub fn Library() -> impl IntoView {
    let state = expect_context::<AppState>();
    let selected = RwSignal::new(Vec::<String>::new());
    let compare = move |_| {
        let keys = selected.get_untracked();
        if keys.len() >= 2 {
            state.navigate(Route::Compare {
                bundles: keys,
                experiment: None,
            });
        }
    };
    view! {
        <section class="library">
            <h1>"Loaded bundles"</h1>
            {move || {
                let mut bundles = state.bundles.get();
                // Loads finish in any order; list them by where they came from
                // (a site's files are numbered in the order it was exported).
                bundles.sort_by(|a, b| a.source.cmp(&b.source));
                if bundles.is_empty() {
                    return view! {
                        <p class="empty">
                            {move || if state.pending.get() > 0 { "Loading bundles…" } else { "No bundle loaded yet." }}
                            " Drop result bundles (JSON written by "<code>"stallscope run"</code>
                            ") anywhere on this page, use “Open bundles…”, or open a link with "
                            <code>"?bundle=URL"</code>"."
                        </p>
                    }
                        .into_any();
                }
                view! {
                    <div class="table-scroll">
                        <table class="bundle-list">
                            <thead>
                                <tr>
                                    <th>"compare"</th>
                                    <th>"bundle"</th>
                                    <th>"source"</th>
                                    <th>"experiments"</th>
                                    <th>"created"</th>
                                    <th>"file"</th>
                                    <th>"size, read in"</th>
                                </tr>
                            </thead>
                            <tbody>
                                {bundles.into_iter().map(|l| bundle_row(l, selected)).collect_view()}
                            </tbody>
                        </table>
                    </div>
                    <p>
                        <button
                            id="compare-selected"
                            on:click=compare
                            prop:disabled=move || selected.with(|s| s.len() < 2)
                        >
                            "Compare selected"
                        </button>
                        " Tick two or more bundles (published vs yours, before vs after, two machines)."
                    </p>
                }
                    .into_any()
            }}
        </section>
    }
}

/// One bundle's row: its compare tick, title (a job by its script), where
/// its figures come from, when it was made and what reading it cost.
fn bundle_row(l: Loaded, selected: RwSignal<Vec<String>>) -> impl IntoView {
    let key = l.key.clone();
    let key2 = l.key.clone();
    let b = l.bundle.clone();
    view! {
        <tr class="bundle-row">
            <td>
                <input
                    type="checkbox"
                    class="compare-pick"
                    prop:checked=move || selected.with(|s| s.contains(&key2))
                    on:change=move |_| {
                        let k = key.clone();
                        selected.update(|s| {
                            if let Some(i) = s.iter().position(|x| *x == k) {
                                s.remove(i);
                            } else {
                                s.push(k);
                            }
                        })
                    }
                />
            </td>
            <td>
                <a class="bundle-link" href=Route::Bundle { bundle: l.key.clone() }.to_hash()>
                    {bundle_title(&b)}
                </a>
            </td>
            <td><Provenance bundle=b.clone() compact=true/></td>
            <td>{b.experiments.len()}</td>
            <td class="created">{show_created(&b.created_at)}</td>
            <td class="muted">{l.source.clone()}</td>
            <td class="muted read-cost">
                {format!("{}, {:.0} ms", show_bytes(l.bytes as f64), l.parse_ms)}
            </td>
        </tr>
    }
}
