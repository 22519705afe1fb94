//! A chart on a canvas with its title note and a PNG export; draws after
//! mount, and again when the bundle or the choice changes. The canvas gets
//! `data-drawn` once drawn (browser tests and the benchmark wait for it).

use std::sync::Arc;

use leptos::prelude::*;
use web_sys::HtmlCanvasElement;

use crate::export::download_canvas_png;

/// What draws the chart.
pub type Draw = Arc<dyn Fn(&HtmlCanvasElement) -> Result<(), String> + Send + Sync>;

#[component]
pub fn ChartPanel(
    /// Stable id, used for the canvas and the PNG's name.
    id: String,
    #[prop(optional)] note: Option<String>,
    #[prop(optional)] diagnostic: bool,
    draw: Draw,
) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    let failure = RwSignal::new(None::<String>);
    let draw_now = draw.clone();
    Effect::new(move |_| {
        if let Some(c) = canvas.get() {
            match draw_now(&c) {
                Ok(()) => {
                    let _ = c.set_attribute("data-drawn", "1");
                    let _ = c.set_attribute("data-drawn-at", &crate::loading::now_ms().to_string());
                    failure.set(None);
                }
                Err(e) => failure.set(Some(e)),
            }
        }
    });
    let file = format!("{}.png", crate::export::file_stem(&id));
    let export = move |_| {
        if let Some(c) = canvas.get_untracked()
            && let Err(e) = download_canvas_png(&file, &c)
        {
            failure.set(Some(e));
        }
    };
    view! {
        <figure class="chart" class:diagnostic=diagnostic>
            {diagnostic.then(|| view! { <div class="mode-label">"diagnostic — synchronized at every stage"</div> })}
            <canvas id=id.clone() class="chart-canvas" node_ref=canvas></canvas>
            <figcaption>
                {note}
                " "
                <button class="export-png" on:click=export>"PNG"</button>
            </figcaption>
            {move || failure.get().map(|e| view! { <p class="warning">"The chart could not be drawn: " {e}</p> })}
        </figure>
    }
}
