//! stallscope's report viewer: a Leptos app (client-side rendered) that loads
//! result bundles and shows comparison tables, charts, verdicts and
//! explanations. Every number comes from `stallscope_bundle::analysis`, the
//! code the command line uses; text from a bundle is always rendered as text.

mod charts;
mod components;
mod export;
mod loading;
mod route;
mod state;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

use crate::components::{
    bundle_page::BundlePage, compare_view::CompareView, drop_zone::DropZone,
    experiment_page::ExperimentPage, header::Header, how_to_read::HowToRead, library::Library,
    load_messages::LoadMessages,
};
use crate::route::Route;
use crate::state::AppState;

/// The whole viewer.
#[component]
pub fn App() -> impl IntoView {
    let state = AppState::new(route::read_from_url());
    provide_context(state);
    follow_url(state);
    loading::load_at_start(state);

    view! {
        <DropZone>
            <Header/>
            <main>
                <LoadMessages/>
                {move || match state.route.get() {
                    Route::Library => view! { <Library/> }.into_any(),
                    Route::Bundle { bundle } => view! { <BundlePage key=bundle/> }.into_any(),
                    Route::Experiment(v) => view! { <ExperimentPage view=v/> }.into_any(),
                    Route::Compare { bundles, experiment } => {
                        view! { <CompareView keys=bundles experiment=experiment/> }.into_any()
                    }
                    Route::HowTo { bundle } => view! { <HowToRead key=bundle/> }.into_any(),
                }}
            </main>
        </DropZone>
    }
}

/// Keep the view in step with the URL (back/forward, edited links).
fn follow_url(state: AppState) {
    let Some(window) = web_sys::window() else {
        return;
    };
    let on_change = Closure::<dyn FnMut()>::new(move || {
        let route = route::read_from_url();
        if state.route.get_untracked() != route {
            state.route.set(route);
        }
    });
    let _ =
        window.add_event_listener_with_callback("hashchange", on_change.as_ref().unchecked_ref());
    // The listener lives as long as the page.
    on_change.forget();
}
