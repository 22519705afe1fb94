//! The job page's answer, read first (`analysis::job_answer`): the headline
//! with direction, unit and mode, the change to make, the memory it costs
//! summed over the training process and its workers, the loader's share of
//! the step by both methods with why they differ, and the next step when the
//! loop stays input-bound. Each figure carries its timing mode in one line
//! beside it (whole-run or diagnostic).

use leptos::prelude::*;
use stallscope_bundle::analysis::{
    DIAGNOSTIC_LINE, Direction, JobAnswer, LoaderShare, MemoryChange, Recommendation,
    WHOLE_RUN_LINE, show_percent, show_ratio,
};

/// The answer block.
pub fn answer(a: &JobAnswer, r: Option<&Recommendation>) -> impl IntoView + use<> {
    let direction = match a.headline.direction {
        Some(Direction::More) => "more",
        Some(Direction::Fewer) => "fewer",
        Some(Direction::NoDifference) => "none",
        None => "",
    };
    let change = r.filter(|r| r.is_change()).and_then(|r| r.change.clone());
    view! {
        <div class="job-answer" class:no-change=direction == "none">
            <p class="job-headline" data-direction=direction>{a.headline.text.clone()}</p>
            <p class="job-headline-detail">
                {change.map(|c| view! { "With " <code class="job-change-inline">{c}</code> " instead of your settings — " })}
                {a.headline.detail.clone()} "."
            </p>
            <p class="mode-line whole-run-line">{WHOLE_RUN_LINE}</p>
        </div>
        {a.memory.as_ref().map(memory)}
        {a.forecast.clone().map(|f| view! { <p class="job-forecast">{f}</p> })}
        {shares(a)}
        {a.next_step.clone().map(|n| view! {
            <div class="job-next-step" role="note"><b>"Next step. "</b>{n}</div>
        })}
    }
}

/// The memory the change costs, summed, with what RSS and PSS count.
fn memory(m: &MemoryChange) -> impl IntoView + use<> {
    view! {
        <div class="job-memory">
            <p>
                <b>"Memory of the change"</b>
                {format!(" ({}, summed at the end of the measured window): ", m.processes())}
                <span class="job-memory-sum">{m.text()}</span>"."
            </p>
            <p class="muted">
                "PSS divides each shared page among the processes that map it, so its sum is what they hold together; RSS counts a shared page once in every process, so its sum overstates."
            </p>
        </div>
    }
}

/// The loader's share of the step, before and after, by both methods.
fn shares(a: &JobAnswer) -> Option<impl IntoView + use<>> {
    if a.shares.is_empty() {
        return None;
    }
    let rows = a.shares.iter().map(share_row).collect_view();
    Some(view! {
        <div class="job-shares">
            <h3>"How much of the step the loader takes"</h3>
            <table class="job-shares-table">
                <thead><tr>
                    <th>"configuration"</th>
                    <th title=DIAGNOSTIC_LINE>"training thread waited for data (diagnostic)"</th>
                    <th title=WHOLE_RUN_LINE>"loader's cost by replay (whole-run)"</th>
                </tr></thead>
                <tbody>{rows}</tbody>
            </table>
            {a.shares_differ.clone().map(|l| view! { <p class="job-shares-differ">{l}</p> })}
            <p class="mode-line diagnostic-line">
                {DIAGNOSTIC_LINE}
                " The share by replay is 1 − your whole-run samples/s ÷ those of the same loop with the data free."
            </p>
        </div>
    })
}

fn share_row(s: &LoaderShare) -> impl IntoView + use<> {
    let pct = |v: Option<f64>| v.map(show_percent).unwrap_or_else(|| "—".into());
    view! {
        <tr>
            <th>{s.label.clone()}</th>
            <td class="cell wait-share">{pct(s.wait)}</td>
            <td class="cell replay-share">{pct(s.by_replay)}</td>
        </tr>
    }
}

/// The grid's figure for a change, when the A/B pairs are shown above.
pub fn grid_line(r: &Recommendation) -> Option<String> {
    r.grid_speedup.filter(|_| r.is_change()).map(|x| {
        format!(
            "In the grid: {} your settings' whole-run samples/s (medians over the repeats).",
            show_ratio(x)
        )
    })
}
