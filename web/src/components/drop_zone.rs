//! The page-wide drop target: bundles dropped anywhere are loaded.

use leptos::prelude::*;

use crate::loading::load_files;
use crate::state::AppState;

#[component]
pub fn DropZone(children: Children) -> impl IntoView {
    let state = expect_context::<AppState>();
    let over = RwSignal::new(false);
    view! {
        <div
            class="drop-zone"
            class:drag-over=move || over.get()
            on:dragover=move |ev: leptos::ev::DragEvent| {
                ev.prevent_default();
                over.set(true);
            }
            on:dragleave=move |_| over.set(false)
            on:drop=move |ev: leptos::ev::DragEvent| {
                ev.prevent_default();
                over.set(false);
                if let Some(files) = ev.data_transfer().and_then(|d| d.files()) {
                    load_files(state, files);
                }
            }
        >
            {children()}
        </div>
    }
}
