//! Files that could not be loaded: which file and what is wrong, each
//! dismissable. Loaded bundles are not affected by them.

use leptos::prelude::*;

use crate::state::AppState;

#[component]
pub fn LoadMessages() -> impl IntoView {
    let state = expect_context::<AppState>();
    view! {
        <div class="load-messages">
            {move || {
                state
                    .failures
                    .get()
                    .into_iter()
                    .map(|f| {
                        let id = f.id;
                        view! {
                            <div class="load-error" role="alert">
                                <strong class="load-error-source">{f.source}</strong>
                                ": "
                                <span class="load-error-message">{f.message}</span>
                                <button class="dismiss" on:click=move |_| state.dismiss_failure(id)>"dismiss"</button>
                            </div>
                        }
                    })
                    .collect_view()
            }}
        </div>
    }
}
