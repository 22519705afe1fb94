//! What a view shows when the bundle it names is not (yet) loaded.

use leptos::prelude::*;

use crate::route::Route;
use crate::state::AppState;

#[component]
pub fn Missing(key: String) -> impl IntoView {
    let state = expect_context::<AppState>();
    view! {
        <section class="missing">
            {move || {
                if state.pending.get() > 0 {
                    view! { <p>"Loading bundles…"</p> }.into_any()
                } else {
                    view! {
                        <p>
                            "No loaded bundle has the id " <code>{key.clone()}</code>
                            ". Open it (drop the file on this page or use “Open bundles…”), or go back to the "
                            <a href=Route::Library.to_hash()>"library"</a> "."
                        </p>
                    }
                        .into_any()
                }
            }}
        </section>
    }
}
