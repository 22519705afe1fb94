//! Two or more bundles side by side: each compared with the first
//! (`stallscope_bundle::analysis::compare_bundles`, the CLI's comparison),
//! machine and settings differences listed (those both sides state one by
//! one, those only one side states folded into a line), and a warning when
//! they differ; two bundles of one job say whether the diagnosis changed and
//! how far the whole-run step moved; a merged job against a run of another
//! size adds its scaling efficiency.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;
use stallscope_bundle::analysis::{
    Change, DifferenceGroups, ExperimentComparison, Unit, compare_bundles, compare_scaling,
    show_ratio,
};

use crate::components::job::ScalingView;
use crate::components::missing::Missing;
use crate::components::provenance::Provenance;
use crate::route::Route;
use crate::state::AppState;

/// Regression threshold shown in the view (percent of whole-run throughput).
const THRESHOLD_PERCENT: f64 = 5.0;

#[component]
pub fn CompareView(keys: Vec<String>, experiment: Option<String>) -> impl IntoView {
    let state = expect_context::<AppState>();
    move || {
        let mut bundles = Vec::new();
        for k in &keys {
            match state.bundle(k) {
                Some(l) => bundles.push(l.bundle),
                None => return view! { <Missing key=k.clone()/> }.into_any(),
            }
        }
        let base = bundles[0].clone();
        let experiment = experiment.clone();
        view! {
            <article class="compare-view">
                <h1>"Side by side"</h1>
                <p>"Base: " <b class="compare-base">{base.title.clone()}</b> " " <Provenance bundle=base.clone() compact=true/></p>
                {bundles[1..]
                    .iter()
                    .map(|new| pair_view(base.clone(), new.clone(), experiment.clone(), keys.clone()))
                    .collect_view()}
            </article>
        }
            .into_any()
    }
}

fn pair_view(
    base: Arc<Bundle>,
    new: Arc<Bundle>,
    only: Option<String>,
    keys: Vec<String>,
) -> impl IntoView {
    let cmp = compare_bundles(&base, &new, THRESHOLD_PERCENT);
    let scaling = compare_scaling(&base, &new);
    let machine = cmp.machine();
    let differ = !machine.is_empty();
    let published = !base.is_measured() || !new.is_measured();
    let experiments = cmp
        .experiments
        .iter()
        .filter(|e| only.as_ref().is_none_or(|id| *id == e.experiment_id))
        .map(|e| experiment_view(e, &keys, only.is_some()))
        .collect::<Vec<_>>();
    view! {
        <section class="compare-pair">
            <h2>"vs " <span class="compare-new">{new.title.clone()}</span></h2>
            <p><Provenance bundle=new.clone() compact=true/></p>
            {published.then(|| view! {
                <p class="note">"One side is a published table: its figures are as published, on the publication's machine; the other side's are measured here."</p>
            })}
            {differ.then(|| machine_view(&machine))}
            {scaling.map(|s| view! { <ScalingView scaling=s/> })}
            {experiments}
        </section>
    }
}

/// The two sides as a difference line names them.
const BASE: &str = "base";
const NEW: &str = "this bundle";

/// The machine differences: those both sides state in a table, those only
/// one side states folded into a line each.
fn machine_view(m: &DifferenceGroups) -> impl IntoView + use<> {
    let folds: Vec<String> = [(BASE, &m.only_base), (NEW, &m.only_new)]
        .into_iter()
        .filter_map(|(side, names)| DifferenceGroups::only_line(side, names, "fields"))
        .collect();
    let rows = m.both.clone();
    view! {
        <div class="warning differences-warning" role="note">
            <p><b>"The machines or software differ"</b>" — differences below may come from them, not from the settings:"</p>
            {(!rows.is_empty()).then(|| view! {
                <table class="differences">
                    <thead><tr><th>"field"</th><th>"base"</th><th>"this bundle"</th></tr></thead>
                    <tbody>
                        {rows
                            .into_iter()
                            .map(|d| view! { <tr><th>{d.field}</th><td>{d.base}</td><td>{d.new}</td></tr> })
                            .collect_view()}
                    </tbody>
                </table>
            })}
            {folds.into_iter().map(|l| view! { <p class="differences-only">{l}</p> }).collect_view()}
        </div>
    }
}

fn experiment_view(
    e: &ExperimentComparison,
    keys: &[String],
    filtered: bool,
) -> impl IntoView + use<> {
    let values: Vec<f64> = e
        .rows
        .iter()
        .flat_map(|r| [r.base.map(|s| s.median), r.new.map(|s| s.median)])
        .flatten()
        .collect();
    let unit = Unit::for_values(e.metric.quantity(), &values);
    let settings = e.settings().lines(BASE, NEW, "settings");
    let before_after = e.before_after.as_ref().map(|b| {
        view! {
            <div class="before-after" role="note">
                {b.sentences().into_iter().map(|l| view! { <p>{l}</p> }).collect_view()}
            </div>
        }
    });
    let heading = format!(
        "{} — whole-run {}{}",
        e.title,
        e.metric.label(),
        e.phase
            .map(|p| format!(", {} epochs", p.as_str()))
            .unwrap_or_default()
    );
    view! {
        <div class="compare-experiment">
            <h3>{heading}</h3>
            <p class="muted">
                <a href=Route::Compare { bundles: keys.to_vec(), experiment: (!filtered).then(|| e.experiment_id.clone()) }.to_hash()>
                    {if filtered { "show every experiment" } else { "show only this experiment" }}
                </a>
            </p>
            {before_after}
            {e.note.clone().map(|n| view! { <p class="warning">{n}</p> })}
            {(!settings.is_empty()).then(|| view! {
                <div class="warning settings-differ">
                    <p>"Settings differ:"</p>
                    <ul>{settings.into_iter().map(|l| view! { <li>{l}</li> }).collect_view()}</ul>
                </div>
            })}
            {(!e.rows.is_empty()).then(|| view! {
                <table class="compare-table">
                    <thead>
                        <tr><th>"configuration"</th><th>"base (median)"</th><th>"this bundle (median)"</th><th>"ratio"</th><th>"change"</th></tr>
                    </thead>
                    <tbody>
                        {e.rows
                            .iter()
                            .map(|r| {
                                let change = r.change.map(change_text).unwrap_or("");
                                view! {
                                    <tr class=format!("change-{}", change.replace(' ', "-")) data-config=r.config_id.clone()>
                                        <th>{r.label.clone()}</th>
                                        <td>{r.base.map(|s| unit.show(s.median)).unwrap_or_else(|| "—".into())}</td>
                                        <td>{r.new.map(|s| unit.show(s.median)).unwrap_or_else(|| "—".into())}</td>
                                        <td>{r.ratio.map(show_ratio).unwrap_or_default()}</td>
                                        <td>{change} {r.note.clone().map(|n| view! { <span class="muted">{n}</span> })}</td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            })}
        </div>
    }
}

fn change_text(c: Change) -> &'static str {
    match c {
        Change::Faster => "faster",
        Change::Same => "same",
        Change::Slower => "slower",
        Change::Noise => "~ within noise",
    }
}
