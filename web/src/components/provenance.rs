//! Where a bundle's figures come from: "measured" or "published" with its
//! citation. Shown on every page that shows a bundle's numbers.

use leptos::prelude::*;
use stallscope_bundle::{Bundle, Provenance as Source};

/// A badge and, for published bundles, the citation.
#[component]
pub fn Provenance(
    bundle: std::sync::Arc<Bundle>,
    #[prop(optional)] compact: bool,
) -> impl IntoView {
    match &bundle.provenance {
        Source::Measured => {
            let device = bundle
                .environment
                .device
                .as_ref()
                .map(|d| format!(" on {} ({})", d.name, d.kind.as_str()))
                .unwrap_or_default();
            let by = bundle
                .environment
                .runner
                .as_ref()
                .map(|r| format!("measured by {} {}", r.name, r.version))
                .unwrap_or_else(|| "measured".into());
            view! {
                <span class="provenance measured">
                    <span class="badge measured">"measured"</span>
                    {(!compact).then(|| format!(" {by}{device}"))}
                </span>
            }
            .into_any()
        }
        Source::Published {
            citation,
            conditions,
        } => {
            let mut cite = citation.title.clone();
            for part in [&citation.authors, &citation.published, &citation.locator]
                .into_iter()
                .flatten()
            {
                cite.push_str(", ");
                cite.push_str(part);
            }
            // Only web links become links; anything else stays text.
            let url = citation
                .url
                .clone()
                .filter(|u| u.starts_with("https://") || u.starts_with("http://"));
            let conditions = conditions.clone();
            view! {
                <span class="provenance published">
                    <span class="badge published">"published"</span>
                    " — every figure as published in " <cite>{cite}</cite>
                    {url.map(|u| view! { " " <a href=u.clone() rel="noopener noreferrer">{u.clone()}</a> })}
                    {(!compact && !conditions.is_empty())
                        .then(|| {
                            view! {
                                <details class="conditions">
                                    <summary>"Conditions as published"</summary>
                                    <dl>
                                        {conditions
                                            .into_iter()
                                            .map(|c| view! { <dt>{c.name}</dt> <dd>{c.value}</dd> })
                                            .collect_view()}
                                    </dl>
                                </details>
                            }
                        })}
                </span>
            }
            .into_any()
        }
    }
}
