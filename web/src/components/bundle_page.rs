//! A bundle: its provenance, the machine, the suite, and one verdict per
//! experiment with the figure it rests on, a job bundle's answer (its
//! recommendation, replay ceiling and memory per worker) and a merged
//! bundle's ranks.

use leptos::prelude::*;
use stallscope_bundle::analysis::{bundle_title, show_created, verdict_in};
use stallscope_bundle::{Bundle, RunState};

use crate::components::environment::Environment;
use crate::components::missing::Missing;
use crate::components::provenance::Provenance;
use crate::components::rank_list::RankList;
use crate::components::your_job::YourJob;
use crate::route::{ExperimentView, Route};
use crate::state::AppState;

#[component]
pub fn BundlePage(key: String) -> impl IntoView {
    let state = expect_context::<AppState>();
    move || match state.bundle(&key) {
        None => view! { <Missing key=key.clone()/> }.into_any(),
        Some(l) => bundle_view(l.bundle).into_any(),
    }
}

fn bundle_view(b: std::sync::Arc<Bundle>) -> impl IntoView {
    let status = match b.status.state {
        RunState::Complete => None,
        RunState::Partial => {
            Some("This run stopped early; everything measured before it stopped is here.")
        }
        RunState::Running => {
            Some("This bundle was written while the run was going; the process did not finish.")
        }
    };
    let status_message = b.status.message.clone();
    let suite = b.environment.suite.clone();
    let notes = b.notes.clone();
    let how = Route::HowTo {
        bundle: b.id.clone(),
    }
    .to_hash();
    view! {
        <article class="bundle-page">
            <h1 class="bundle-title">{bundle_title(&b)}</h1>
            <p class="meta"><Provenance bundle=b.clone()/></p>
            <p class="meta muted">{format!("id {} · created {}", b.id, show_created(&b.created_at))}</p>
            {status.map(|s| view! { <p class="warning">{s} " " {status_message.clone()}</p> })}
            <p><a href=how>"How to read this report"</a></p>
            <YourJob bundle=b.clone()/>
            <section class="experiments">
                <h2>"Experiments"</h2>
                {b.experiments
                    .iter()
                    .map(|e| {
                        let v = verdict_in(e, b.schema_version);
                        let href = Route::Experiment(ExperimentView::new(&b.id, &e.id)).to_hash();
                        view! {
                            <div class="experiment-card">
                                <h3><a class="experiment-link" href=href>{e.title.clone()}</a></h3>
                                <p class="muted">
                                    {format!(
                                        "{} · {} configuration{}",
                                        e.kind.as_str(),
                                        e.configurations.len(),
                                        if e.configurations.len() == 1 { "" } else { "s" }
                                    )}
                                </p>
                                {match v {
                                    Some(v) => view! {
                                        <p class="verdict">{v.headline}</p>
                                        <p class="verdict-figure">
                                            "Rests on: " {v.figure}
                                            {v.mode.map(|m| format!(" [{}]", m.label()))}
                                        </p>
                                    }
                                        .into_any(),
                                    None => view! { <p class="verdict muted">"Nothing to conclude from: no whole-run figures."</p> }
                                        .into_any(),
                                }}
                            </div>
                        }
                    })
                    .collect_view()}
            </section>
            <RankList bundle=b.clone()/>
            <Environment bundle=b.clone()/>
            {suite.map(|s| view! {
                <details class="suite">
                    <summary>{format!("Suite “{}”", s.name)}</summary>
                    <pre>{s.toml}</pre>
                </details>
            })}
            {(!notes.is_empty()).then(|| view! {
                <section class="notes">
                    <h3>"Notes"</h3>
                    <ul>{notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}</ul>
                </section>
            })}
        </article>
    }
}
