//! The `<option>`s of a configuration picker (the timeline and per-rank
//! sections each pick one configuration of the experiment).

use leptos::prelude::*;

/// One option per `(id, label)`, the one `chosen` holds selected.
pub fn config_options(
    configs: &[(String, String)],
    chosen: RwSignal<String>,
) -> impl IntoView + use<> {
    configs
        .iter()
        .map(|(id, label)| {
            let id2 = id.clone();
            view! {
                <option value=id.clone() selected=move || chosen.get() == id2>
                    {label.clone()}
                </option>
            }
        })
        .collect_view()
}
