//! Two or more bundles side by side: each compared with the first
//! (`stallscope_bundle::analysis::compare_bundles`, the CLI's comparison).
//! Each pair opens with which is which (`analysis::compare_sides`: both
//! titles, dates, runners and commits, a different commit flagged), then
//! the job's own differences (its world size) apart from the
//! machine's, the settings that differ as a small table, and each
//! experiment's whole-run figures with each side's spread and noise flag.
//! Two bundles of one job say whether the diagnosis changed and how far the
//! whole-run step moved; a merged job against a run of another size adds
//! its scaling efficiency.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;
use stallscope_bundle::analysis::{
    Change, CompareRow, DifferenceGroups, ExperimentComparison, Side, Sides, Summary, Unit,
    ValueChange, bundle_title, compare_bundles, compare_scaling, show_ratio,
};

use crate::components::job::ScalingView;
use crate::components::missing::Missing;
use crate::components::provenance::Provenance;
use crate::route::Route;
use crate::state::AppState;

/// Regression threshold shown in the view (percent of whole-run throughput).
const THRESHOLD_PERCENT: f64 = 5.0;
/// Longer setting values are cut in the table (the whole value is its title).
const MAX_VALUE: usize = 80;

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
                <p>"Base: " <b class="compare-base">{bundle_title(&base)}</b> " " <Provenance bundle=base.clone() compact=true/></p>
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
    let sides = cmp.sides.clone();
    let machine = cmp.machine();
    let job = cmp.job();
    let published = !base.is_measured() || !new.is_measured();
    let experiments = cmp
        .experiments
        .iter()
        .filter(|e| only.as_ref().is_none_or(|id| *id == e.experiment_id))
        .map(|e| experiment_view(e, &keys, only.is_some()))
        .collect::<Vec<_>>();
    view! {
        <section class="compare-pair">
            <h2>"vs " <span class="compare-new">{sides.new.title.clone()}</span></h2>
            <p><Provenance bundle=new.clone() compact=true/></p>
            {sides_view(&sides)}
            {published.then(|| view! {
                <p class="note">"One side is a published table: its figures are as published, on the publication's machine; the other side's are measured here."</p>
            })}
            {(!job.is_empty()).then(|| differences_box(
                "job-differences",
                "The jobs differ",
                " — a different job, whatever the machines:",
                &job,
            ))}
            {(!machine.is_empty()).then(|| differences_box(
                "differences-warning",
                "The machines or software differ",
                " — differences below may come from them, not from the settings:",
                &machine,
            ))}
            {scaling.map(|s| view! { <ScalingView scaling=s new=new.clone()/> })}
            {experiments}
        </section>
    }
}

/// Which is which: both sides' titles, dates, runners and commits, and the
/// flags (a different commit).
fn sides_view(s: &Sides) -> impl IntoView + use<> {
    let runner = |x: &Side| {
        if x.published {
            return "— (published)".to_string();
        }
        x.runner.clone().unwrap_or_else(|| "not recorded".into())
    };
    let commit = |x: &Side| x.commit.clone().unwrap_or_else(|| "—".into());
    // A published table has no runner: nothing to flag against it.
    let measured = !s.base.published && !s.new.published;
    let differ = measured && s.base.commit != s.new.commit;
    let rows = [
        ("title", s.base.title.clone(), s.new.title.clone(), false),
        (
            "created",
            s.base.created.clone(),
            s.new.created.clone(),
            false,
        ),
        (
            "runner",
            runner(&s.base),
            runner(&s.new),
            measured && s.base.runner != s.new.runner,
        ),
        ("runner commit", commit(&s.base), commit(&s.new), differ),
    ];
    view! {
        <div class="table-scroll">
            <table class="compare-sides">
                <thead><tr><th></th><th>"base"</th><th>"this bundle"</th></tr></thead>
                <tbody>
                    {rows.into_iter().map(|(field, b, n, flag)| view! {
                        <tr data-field=field class:flagged=flag>
                            <th>{field}</th>
                            <td class="side-base">{b}</td>
                            <td class="side-new">{n}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        {s.flags.iter().map(|f| view! { <p class="warning compare-flag">{f.clone()}</p> }).collect_view()}
    }
}

/// A box of differences: those both sides state as a table, those only
/// one side states folded into a line each.
fn differences_box(
    class: &'static str,
    head: &'static str,
    tail: &'static str,
    m: &DifferenceGroups,
) -> impl IntoView + use<> {
    let folds: Vec<String> = [(BASE, &m.only_base), (NEW, &m.only_new)]
        .into_iter()
        .filter_map(|(side, names)| DifferenceGroups::only_line(side, names, "fields"))
        .collect();
    view! {
        <div class=format!("warning {class}") role="note">
            <p><b>{head}</b>{tail}</p>
            {differences_table("differences", &m.both)}
            {folds.into_iter().map(|l| view! { <p class="differences-only">{l}</p> }).collect_view()}
        </div>
    }
}

/// Fields both sides state, with their two values (long ones cut).
fn differences_table(class: &'static str, rows: &[ValueChange]) -> Option<impl IntoView + use<>> {
    let cut = |v: &str| {
        if v.chars().count() > MAX_VALUE {
            format!("{}…", v.chars().take(MAX_VALUE - 1).collect::<String>())
        } else {
            v.to_string()
        }
    };
    (!rows.is_empty()).then(|| {
        view! {
            <table class=class>
                <thead><tr><th>"field"</th><th>"base"</th><th>"this bundle"</th></tr></thead>
                <tbody>
                    {rows.iter().map(|d| view! {
                        <tr data-field=d.field.clone()>
                            <th>{d.field.clone()}</th>
                            <td title=d.base.clone()>{cut(&d.base)}</td>
                            <td title=d.new.clone()>{cut(&d.new)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        }
    })
}

/// The two sides as a difference line names them.
const BASE: &str = "base";
const NEW: &str = "this bundle";

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
    let settings = e.settings();
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
    let folds: Vec<String> = [(BASE, &settings.only_base), (NEW, &settings.only_new)]
        .into_iter()
        .filter_map(|(side, names)| DifferenceGroups::only_line(side, names, "settings"))
        .collect();
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
                    <p>"Settings that differ:"</p>
                    {differences_table("settings-table", &settings.both)}
                    {folds.into_iter().map(|l| view! { <p class="differences-only">{l}</p> }).collect_view()}
                </div>
            })}
            {(!e.rows.is_empty()).then(|| results_table(e, &unit))}
        </div>
    }
}

/// Each configuration's whole-run figure on both sides, with its spread
/// over the repeats and the noise flag of each side.
fn results_table(e: &ExperimentComparison, unit: &Unit) -> impl IntoView + use<> {
    let rows = e.rows.iter().map(|r| result_row(r, unit)).collect_view();
    view! {
        <div class="table-scroll">
            <table class="compare-table">
                <thead>
                    <tr><th>"configuration"</th><th>"base (median [min–max])"</th><th>"this bundle (median [min–max])"</th><th>"ratio"</th><th>"change"</th></tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <p class="muted">{format!("(! N%) flags a side whose repeats spread over 10% of their median; a change inside either side's noise reads “~ within noise”. The threshold of a change is {THRESHOLD_PERCENT}%.")}</p>
    }
}

fn result_row(r: &CompareRow, unit: &Unit) -> impl IntoView + use<> {
    let change = r.change.map(change_text).unwrap_or("");
    view! {
        <tr class=format!("change-{}", change.replace(' ', "-")) data-config=r.config_id.clone()>
            <th>{r.label.clone()}</th>
            <td class="side-base">{side_cell(r.base.as_ref(), unit)}</td>
            <td class="side-new">{side_cell(r.new.as_ref(), unit)}</td>
            <td>{r.ratio.map(show_ratio).unwrap_or_default()}</td>
            <td>{change} {r.note.clone().map(|n| view! { <span class="muted">{n}</span> })}</td>
        </tr>
    }
}

/// A side's median, its min–max over the repeats and its noise flag.
fn side_cell(s: Option<&Summary>, unit: &Unit) -> impl IntoView + use<> {
    let Some(s) = s else {
        return view! { "—" }.into_any();
    };
    let range = (s.n > 1).then(|| format!(" [{}–{}]", unit.number(s.min), unit.number(s.max)));
    let noise = s.noisy.then(|| format!(" (! {:.0}%)", s.spread * 100.0));
    view! {
        <span class="value">{unit.show(s.median)}</span>
        {range.map(|t| view! { <span class="range">{t}</span> })}
        {noise.map(|t| view! { <span class="noise" title="spread (max − min) over the median above 10%">{t}</span> })}
    }
    .into_any()
}

fn change_text(c: Change) -> &'static str {
    match c {
        Change::Faster => "faster",
        Change::Same => "same",
        Change::Slower => "slower",
        Change::Noise => "~ within noise",
    }
}
