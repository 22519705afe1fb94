//! The comparison table of an experiment (built by
//! `stallscope_bundle::analysis::comparison_table`, the same table the CLI
//! prints): sortable, a baseline picker, median with min–max, noise flags,
//! the best cell marked, ratios to the baseline, CSV/Markdown export. When a
//! swept knob does not apply to some configuration, the swept parameters get
//! columns and such a cell is "—" with the reason as its title; the table's
//! footnotes (runs left out, knobs that do not apply) follow it.

use std::cmp::Ordering;
use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::Bundle;
use stallscope_bundle::analysis::{
    Cell, Closeness, Column, ComparisonTable as Table, Row, TableOptions, comparison_table,
    show_ratio,
};

use crate::export::{download_text, file_stem};
use crate::route::{ExperimentView, Route, Sort};
use crate::state::AppState;

#[component]
pub fn ComparisonTable(
    bundle: Arc<Bundle>,
    experiment: usize,
    view: ExperimentView,
) -> impl IntoView {
    let e = &bundle.experiments[experiment];
    let table = comparison_table(
        e,
        &TableOptions {
            baseline: view.baseline.clone(),
            ..Default::default()
        },
    );
    let order = row_order(&table, &view.sort);
    let layout = Layout {
        has_failures: table.rows.iter().any(|r| r.failure.is_some()),
        // The swept parameters get columns when one does not apply somewhere,
        // and always when engines are compared (engine is then a dimension).
        show_params: table.rows.iter().any(|r| !r.not_applicable.is_empty())
            || e.swept.iter().any(|s| s == "engine"),
    };
    let param_heads = layout.show_params.then(|| {
        e.swept
            .iter()
            .map(|p| view! { <th class="param-head">{p.clone()}</th> })
            .collect_view()
    });
    let sort_by = sorter(&view);
    let sort_first = sort_by.clone();
    let headers = metric_heads(&table, &view.sort, sort_by);
    let rows = order
        .into_iter()
        .map(|ri| table_row(&table, &table.rows[ri], layout))
        .collect_view();

    view! {
        <section class="comparison">
            {table_tools(&bundle, experiment, &table, &view)}
            <div class="table-scroll">
                <table class="comparison-table">
                    <thead>
                        <tr>
                            <th class="sortable config-head" tabindex="0" aria-sort=aria_sort(&view.sort, None) on:click=move |_| sort_first(None, false)>
                                {format!("configuration{}", sort_arrow(&view.sort, None))}
                            </th>
                            {param_heads}
                            {headers}
                            {layout.has_failures.then(|| view! { <th>"failure"</th> })}
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            {table.footnotes().into_iter().map(|f| view! { <p class="note table-footnote">{f}</p> }).collect_view()}
            <p class="muted table-phase">
                {format!("Timing columns read {} epochs unless the heading says otherwise; the mode of each column is in its heading.", table.phase.as_str())}
            </p>
        </section>
    }
}

/// Which optional columns the table shows.
#[derive(Clone, Copy)]
struct Layout {
    /// A failure column, when a configuration failed.
    has_failures: bool,
    /// A column per swept parameter.
    show_params: bool,
}

/// Navigate to `view` changed by `f`.
fn navigate_with(view: &ExperimentView) -> impl Fn(&dyn Fn(&mut ExperimentView)) + Clone + use<> {
    let state = expect_context::<AppState>();
    let view = view.clone();
    move |f: &dyn Fn(&mut ExperimentView)| {
        let mut v = view.clone();
        f(&mut v);
        state.navigate(Route::Experiment(v));
    }
}

/// Sort by a column (`None`: the configuration), or flip the order when it
/// is the sorted one already; a metric column starts with its best first.
fn sorter(view: &ExperimentView) -> impl Fn(Option<usize>, bool) + Clone + use<> {
    let nav = navigate_with(view);
    move |column: Option<usize>, higher_is_better: bool| {
        nav(&|v: &mut ExperimentView| {
            v.sort = if v.sort.column == column {
                Sort {
                    column,
                    descending: !v.sort.descending,
                }
            } else {
                Sort {
                    column,
                    descending: column.is_some() && higher_is_better,
                }
            };
        })
    }
}

/// The baseline picker and the CSV and Markdown exports.
fn table_tools(
    bundle: &Bundle,
    experiment: usize,
    table: &Table,
    view: &ExperimentView,
) -> impl IntoView + use<> {
    let e = &bundle.experiments[experiment];
    let nav = navigate_with(view);
    let pick_baseline = move |ev| {
        let id = event_target_value(&ev);
        nav(&|v: &mut ExperimentView| v.baseline = Some(id.clone()));
    };
    let stem = format!("{}-{}", file_stem(&bundle.id), file_stem(&e.id));
    let csv = table.to_csv();
    let md = format!(
        "### {}\n\n{}\n\n{}",
        e.title,
        provenance_line(bundle),
        table.to_markdown()
    );
    let (csv_name, md_name) = (format!("{stem}.csv"), format!("{stem}.md"));
    let export_error = RwSignal::new(None::<String>);
    let options = table
        .rows
        .iter()
        .map(|r| {
            let selected = table.baseline.as_deref() == Some(r.config_id.as_str());
            view! { <option value=r.config_id.clone() selected=selected>{r.label.clone()}</option> }
        })
        .collect_view();
    view! {
        <div class="table-tools">
            <label>
                "Baseline: "
                <select id="baseline" on:change=pick_baseline>{options}</select>
            </label>
            " ratios are to the baseline; ★ marks the best of a column where there is a choice; (! N%) flags a spread over 10%; the table scrolls sideways with the configuration fixed. "
            <button class="export-csv" on:click=move |_| if let Err(e) = download_text(&csv_name, "text/csv", &csv) { export_error.set(Some(e)) }>"CSV"</button>
            <button class="export-md" on:click=move |_| if let Err(e) = download_text(&md_name, "text/markdown", &md) { export_error.set(Some(e)) }>"Markdown"</button>
            {move || export_error.get().map(|e| view! { <span class="warning">{e}</span> })}
        </div>
    }
}

/// The metric columns' headings: sortable by click, Enter or space.
fn metric_heads<F: Fn(Option<usize>, bool) + Clone + 'static>(
    table: &Table,
    sort: &Sort,
    sort_by: F,
) -> impl IntoView + use<F> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let sort_by = sort_by.clone();
            let hib = c.higher_is_better;
            let heading = c.heading_with_unit();
            view! {
                <th
                    class="metric-head sortable"
                    title=c.explanation
                    data-col=i
                    tabindex="0"
                    aria-sort=aria_sort(sort, Some(i))
                    on:click={
                        let sort_by = sort_by.clone();
                        move |_| sort_by(Some(i), hib)
                    }
                    on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                        if ev.key() == "Enter" || ev.key() == " " {
                            ev.prevent_default();
                            sort_by(Some(i), hib);
                        }
                    }
                >
                    {format!("{heading}{}", sort_arrow(sort, Some(i)))}
                    <span class="help" aria-label=c.explanation>"?"</span>
                </th>
            }
        })
        .collect_view()
}

/// One configuration's row: its label, parameters, cells and failure.
fn table_row(table: &Table, r: &Row, layout: Layout) -> impl IntoView + use<> {
    let is_base = table.baseline.as_deref() == Some(r.config_id.as_str());
    let cells = r
        .cells
        .iter()
        .enumerate()
        .map(|(ci, cell)| metric_cell(&table.columns[ci], ci, cell.as_ref(), r, is_base))
        .collect_view();
    view! {
        <tr class:baseline=is_base data-config=r.config_id.clone()>
            <th class="config">{r.label.clone()}</th>
            {layout.show_params.then(|| param_cells(r))}
            {cells}
            {layout.has_failures.then(|| view! { <td class="failure">{r.failure.clone().unwrap_or_default()}</td> })}
        </tr>
    }
}

/// One cell: the figure, the min–max range, the noise flag and the ratio to
/// the baseline, with the best of the column marked; "—" when empty.
fn metric_cell(col: &Column, ci: usize, cell: Option<&Cell>, r: &Row, is_base: bool) -> AnyView {
    let Some(cell) = cell else {
        return view! { <td class="cell empty" data-config=r.config_id.clone() data-col=ci>"—"</td> }.into_any();
    };
    let range = (cell.summary.n > 1).then(|| {
        format!(
            "[{}–{}]",
            col.unit.number(cell.summary.min),
            col.unit.number(cell.summary.max)
        )
    });
    let noise = cell
        .summary
        .noisy
        .then(|| format!("(! {:.0}%)", cell.summary.spread * 100.0));
    let ratio = if is_base {
        Some("baseline".to_string())
    } else {
        cell.ratio_to_baseline.map(show_ratio)
    };
    view! {
        <td
            class=format!("cell {}", closeness_class(cell.closeness))
            class:best=cell.best
            data-config=r.config_id.clone()
            data-col=ci
        >
            {cell.best.then(|| view! { <span class="best-mark" title="best of the column">"★ "</span> })}
            <span class="value">{col.unit.show(cell.value)}</span>
            {range.map(|t| view! { <span class="range">{t}</span> })}
            {noise.map(|t| view! { <span class="noise" title="spread (max − min) over the median above 10%">{t}</span> })}
            {ratio.map(|t| view! { <span class="ratio">{t}</span> })}
        </td>
    }
    .into_any()
}

/// The swept parameters' values of a row; one that does not apply is
/// marked, with the reason as its title.
fn param_cells(r: &Row) -> impl IntoView + use<> {
    r.params
        .iter()
        .map(|(name, value)| {
            let reason = r
                .not_applicable
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, why)| format!("{name} does not apply: {why}"));
            let na = reason.is_some();
            view! {
                <td class="param" class:not-applicable=na data-param=name.clone() title=reason>
                    {value.clone()}
                </td>
            }
        })
        .collect_view()
}

/// The arrow of the sorted heading.
fn sort_arrow(sort: &Sort, col: Option<usize>) -> &'static str {
    if sort.column == col {
        if sort.descending { " ▼" } else { " ▲" }
    } else {
        ""
    }
}

/// Row indices in display order.
fn row_order(table: &Table, sort: &Sort) -> Vec<usize> {
    let mut order: Vec<usize> = (0..table.rows.len()).collect();
    if let Some(col) = sort.column.filter(|c| *c < table.columns.len()) {
        order.sort_by(|a, b| {
            let va = table.rows[*a].cells[col].as_ref().map(|c| c.value);
            let vb = table.rows[*b].cells[col].as_ref().map(|c| c.value);
            match (va, vb) {
                (Some(x), Some(y)) => {
                    let o = x.total_cmp(&y);
                    if sort.descending { o.reverse() } else { o }
                }
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        });
    } else if sort.descending {
        order.reverse();
    }
    order
}

/// The `aria-sort` of a heading.
fn aria_sort(sort: &Sort, column: Option<usize>) -> &'static str {
    match (sort.column == column, sort.descending) {
        (false, _) => "none",
        (true, false) => "ascending",
        (true, true) => "descending",
    }
}

fn closeness_class(c: Closeness) -> &'static str {
    match c {
        Closeness::Best => "c-best",
        Closeness::Near => "c-near",
        Closeness::Middle => "c-middle",
        Closeness::Far => "c-far",
        Closeness::VeryFar => "c-very-far",
    }
}

fn provenance_line(b: &Bundle) -> String {
    match &b.provenance {
        stallscope_bundle::Provenance::Measured => {
            format!("Measured by stallscope (bundle {}).", b.id)
        }
        stallscope_bundle::Provenance::Published { citation, .. } => {
            format!("Published figures, as published in: {}.", citation.title)
        }
    }
}
