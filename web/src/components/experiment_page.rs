//! One experiment: verdict, the comparison table, the charts (whole-run
//! throughput with memory and the sweet spot; the diagnostic stage breakdown,
//! kept apart; first vs steady epochs; per-step distribution) and what every
//! figure means; the sampled timelines, the CPU cost and, for a merged
//! multi-rank bundle, the per-rank view. An experiment of a kind from a newer format is shown the
//! same way, its verdict saying so (`analysis::unknown_kind_note`).

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::OpenEnum;
use stallscope_bundle::analysis::{
    SettingsView, bundle_title, settings_view, show_percent, stall_attribution, verdict_in,
};
use stallscope_bundle::{Bundle, Experiment};
use web_sys::HtmlCanvasElement;

use crate::charts;
use crate::components::chart_panel::{ChartPanel, Draw};
use crate::components::comparison_table::ComparisonTable;
use crate::components::cost::Cost;
use crate::components::failures::Failures;
use crate::components::metric_glossary::{MetricGlossary, metrics_of};
use crate::components::missing::Missing;
use crate::components::provenance::Provenance;
use crate::components::ranks::RankPanel;
use crate::components::timelines::Timelines;
use crate::route::{ExperimentView, Route};
use crate::state::AppState;

#[component]
pub fn ExperimentPage(view: ExperimentView) -> impl IntoView {
    let state = expect_context::<AppState>();
    move || {
        let Some(loaded) = state.bundle(&view.bundle) else {
            return view! { <Missing key=view.bundle.clone()/> }.into_any();
        };
        let Some(index) = loaded
            .bundle
            .experiments
            .iter()
            .position(|e| e.id == view.experiment)
        else {
            return view! {
                <section class="missing">
                    <p>
                        "The bundle “" {loaded.bundle.title.clone()} "” has no experiment " <code>{view.experiment.clone()}</code> ". "
                        <a href=Route::Bundle { bundle: view.bundle.clone() }.to_hash()>"See its experiments"</a> "."
                    </p>
                </section>
            }
                .into_any();
        };
        experiment_view(loaded.bundle, index, view.clone()).into_any()
    }
}

fn experiment_view(b: Arc<Bundle>, index: usize, view: ExperimentView) -> impl IntoView {
    let e = &b.experiments[index];
    let stem = format!(
        "{}-{}",
        crate::export::file_stem(&b.id),
        crate::export::file_stem(&e.id)
    );
    let whole_run = whole_run_charts(&b, index, &stem);
    let diagnostic = diagnostic_charts(&b, index, &stem, &view);
    let how_href = Route::HowTo {
        bundle: b.id.clone(),
    }
    .to_hash();
    view! {
        <article class="experiment-page">
            {heading(&b, index)}
            <ComparisonTable bundle=b.clone() experiment=index view=view.clone()/>
            {whole_run}
            {diagnostic}
            <Timelines bundle=b.clone() experiment=index stem=stem.clone()/>
            <Cost bundle=b.clone() experiment=index/>
            {(!b.ranks.is_empty()).then(|| view! {
                <RankPanel bundle=b.clone() experiment=index stem=stem.clone()/>
            })}
            <Failures bundle=b.clone() experiment=index/>
            <MetricGlossary metrics=metrics_of(e)/>
            <p><a href=how_href>"How to read this report"</a></p>
        </article>
    }
}

/// The crumbs, the title, where the figures come from, the description,
/// the settings and the verdict.
fn heading(b: &Arc<Bundle>, index: usize) -> impl IntoView + use<> {
    let e = &b.experiments[index];
    // A kind from a newer format: the verdict says so, with the bundle's version.
    let newer = e.kind.unknown().is_some();
    let v = verdict_in(e, b.schema_version);
    let settings = settings_view(e);
    let bundle_href = Route::Bundle {
        bundle: b.id.clone(),
    }
    .to_hash();
    view! {
        <nav class="crumbs">
            <a href=Route::Library.to_hash()>"library"</a> " › "
            <a href=bundle_href>{bundle_title(b)}</a> " › "
            <span>{e.title.clone()}</span>
        </nav>
        <h1 class="experiment-title">{e.title.clone()}</h1>
        <p class="meta"><Provenance bundle=b.clone() compact=true/></p>
        {e.description.clone().map(|d| view! { <p class="description">{d}</p> })}
        {e.not_applicable.clone().map(|r| view! { <p class="warning">"Not applicable here: " {r}</p> })}
        {settings_box(settings)}
        {v.map(|v| view! {
            <div class="verdict-box" class:newer-format=newer>
                <p class="verdict">{v.headline}</p>
                <p class="verdict-figure">"Rests on: " {v.figure} {v.mode.map(|m| format!(" [{}]", m.label()))}</p>
            </div>
        })}
    }
}

/// What differs between the configurations, in a line; everything they
/// share folded under it, rounded.
fn settings_box(s: SettingsView) -> impl IntoView {
    let shared = s.shared.len();
    view! {
        {(!s.differ.is_empty()).then(|| view! {
            <p class="settings-differ-line">
                <b>"What differs between the configurations: "</b>
                {s.differ.into_iter().map(|(k, values)| view! {
                    <span class="setting"><b>{k}</b> " " {values.join(", ")}</span>
                }).collect_view()}
            </p>
        })}
        {(shared > 0).then(|| view! {
            <details class="settings">
                <summary>{format!("Settings every configuration shares ({shared})")}</summary>
                <dl class="settings-list">
                    {s.shared.into_iter().map(|(k, v)| view! { <dt>{k}</dt> <dd>{v}</dd> }).collect_view()}
                </dl>
            </details>
        })}
    }
}

/// What draws experiment `index` of `b` with `chart`. Charts hold the
/// bundle, not a copy of the experiment (it may carry millions of per-step
/// records).
fn draw_experiment(
    b: &Arc<Bundle>,
    index: usize,
    chart: fn(&HtmlCanvasElement, &Experiment) -> charts::ChartResult,
) -> Draw {
    let e = b.clone();
    Arc::new(move |c| chart(c, &e.experiments[index]))
}

/// The whole-run charts that apply: throughput with memory and the sweet
/// spot, the rates, first vs steady epochs.
fn whole_run_charts(b: &Arc<Bundle>, index: usize, stem: &str) -> Option<impl IntoView + use<>> {
    let e = &b.experiments[index];
    let throughput = charts::throughput::applies(e).then(|| {
        let draw = draw_experiment(b, index, charts::throughput::draw);
        view! {
            <ChartPanel
                id=format!("{stem}-throughput")
                note="Whole-run throughput: median of the repeats with the min–max bar; peak memory on the right axis; the green line marks the sweet spot (the smallest value reaching 95% of the best)."
                    .to_string()
                draw=draw
            />
        }
    });
    let rates = charts::rates::applies(e).then(|| {
        let draw = draw_experiment(b, index, charts::rates::draw);
        let note = rates_note(e);
        view! { <ChartPanel id=format!("{stem}-rates") note=note draw=draw/> }
    });
    let epochs = charts::epochs::applies(e).then(|| {
        let draw = draw_experiment(b, index, charts::epochs::draw);
        view! {
            <ChartPanel
                id=format!("{stem}-epochs")
                note="The first epoch pays for worker start-up, first reads and cold caches; steady epochs are what a long run sees.".to_string()
                draw=draw
            />
        }
    });
    (throughput.is_some() || rates.is_some() || epochs.is_some()).then(|| {
        view! {
            <section class="charts whole-run-charts">
                <h2>"Whole-run"</h2>
                {throughput}
                {rates}
                {epochs}
            </section>
        }
    })
}

/// The rates chart's note: the differential stall attribution when the
/// experiment has one.
fn rates_note(e: &Experiment) -> String {
    match stall_attribution(e) {
        Some(a) => format!(
            "Differential attribution from these whole-run rates: transfer stall {} (1 − from host ÷ compute-only), data stall {} (1 − full pipeline ÷ from host); the loop waited for input {} of the epoch.",
            show_percent(a.transfer_stall.max(0.0)),
            show_percent(a.data_stall.max(0.0)),
            show_percent(a.waiting_share)
        ),
        None => "Whole-run throughput of each configuration: median of the repeats with the min–max bar.".to_string(),
    }
}

/// The diagnostic charts that apply, kept apart: the stage breakdown and
/// the per-step distribution.
fn diagnostic_charts(
    b: &Arc<Bundle>,
    index: usize,
    stem: &str,
    view: &ExperimentView,
) -> Option<impl IntoView + use<>> {
    let e = &b.experiments[index];
    let stages = charts::stages::applies(e).then(|| {
        let draw = draw_experiment(b, index, charts::stages::draw);
        view! {
            <ChartPanel
                id=format!("{stem}-stages")
                diagnostic=true
                note="Where a step waits: mean next-wait, transfer and compute per step, each synchronized. The sum is not the whole-run step time, and these bars say nothing about throughput."
                    .to_string()
                draw=draw
            />
        }
    });
    let steps = steps_chart(b, index, stem, view);
    (stages.is_some() || steps.is_some()).then(|| view! {
        <section class="charts diagnostic-charts">
            <h2>"Diagnostic — synchronized at every stage"</h2>
            <p class="muted">"These figures locate the stage that waits. They are not performance: never compare them with whole-run throughput."</p>
            {stages}
            {steps}
        </section>
    })
}

/// The per-step distribution of one configuration (the view's choice, else
/// the first), with a picker of the configurations that have steps.
fn steps_chart(
    b: &Arc<Bundle>,
    index: usize,
    stem: &str,
    view: &ExperimentView,
) -> Option<impl IntoView + use<>> {
    let state = expect_context::<AppState>();
    let with_steps: Vec<(String, String)> =
        charts::steps::configurations_with_steps(&b.experiments[index])
            .into_iter()
            .map(|c| (c.id.clone(), c.label.clone()))
            .collect();
    (!with_steps.is_empty()).then(|| {
        let chosen = view
            .steps_of
            .clone()
            .filter(|id| with_steps.iter().any(|(c, _)| c == id))
            .unwrap_or_else(|| with_steps[0].0.clone());
        let e = b.clone();
        let chosen_draw = chosen.clone();
        let draw: Draw = Arc::new(move |c| match e.experiments[index].configuration(&chosen_draw) {
            Some(cfg) => charts::steps::draw(c, cfg),
            None => Err("no such configuration".into()),
        });
        let view2 = view.clone();
        let pick = move |ev| {
            let mut v = view2.clone();
            v.steps_of = Some(event_target_value(&ev));
            state.navigate(Route::Experiment(v));
        };
        view! {
            <label class="steps-pick">
                "Per-step distribution of: "
                <select id="steps-of" on:change=pick>
                    {with_steps
                        .iter()
                        .map(|(id, label)| view! { <option value=id.clone() selected=*id == chosen>{label.clone()}</option> })
                        .collect_view()}
                </select>
            </label>
            <ChartPanel id=format!("{stem}-steps") diagnostic=true draw=draw/>
        }
    })
}
