//! The top bar: the library link, the file picker, and loads in flight.

use leptos::prelude::*;

use crate::loading::load_files;
use crate::route::Route;
use crate::state::AppState;

#[component]
pub fn Header() -> impl IntoView {
    let state = expect_context::<AppState>();
    view! {
        <header class="top">
            <a class="brand" href=Route::Library.to_hash()>"stallscope"</a>
            <span class="tagline">"where does the training step wait?"</span>
            <span class="spacer"></span>
            {move || (state.pending.get() > 0).then(|| view! { <span class="pending">"loading…"</span> })}
            <label class="button">
                "Open bundles…"
                <input
                    id="file-picker"
                    type="file"
                    accept=".json,application/json"
                    multiple=true
                    on:change=move |ev| {
                        let input: web_sys::HtmlInputElement = event_target(&ev);
                        if let Some(files) = input.files() {
                            load_files(state, files);
                        }
                        input.set_value("");
                    }
                />
            </label>
        </header>
    }
}
