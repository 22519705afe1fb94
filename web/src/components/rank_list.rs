//! The ranks of a merged bundle and the machine each ran on (`Bundle.ranks`),
//! as recorded: launcher layout, host name, CPU, cores, memory and a rank's
//! status when its own bundle did not complete; the table of every rank is
//! built when the reader opens it (at once for 16 ranks or fewer).

use leptos::prelude::*;
use stallscope_bundle::analysis::show_bytes;
use stallscope_bundle::{Bundle, RankHost};

fn row(r: &RankHost) -> impl IntoView + use<> {
    let l = &r.layout;
    let host = r.host.as_ref();
    let dash = || "—".to_string();
    view! {
        <tr data-rank=r.rank.to_string()>
            <th>{r.rank.to_string()}</th>
            <td>{l.node.map(|n| n.to_string()).unwrap_or_else(dash)}</td>
            <td>{l.local_rank.to_string()}</td>
            <td class="hostname">{l.hostname.clone().unwrap_or_else(dash)}</td>
            <td>{host.and_then(|h| h.cpu_model.clone()).unwrap_or_else(dash)}</td>
            <td>{host.and_then(|h| h.logical_cores).map(|c| c.to_string()).unwrap_or_else(dash)}</td>
            <td>{host.and_then(|h| h.memory_bytes).map(|m| show_bytes(m as f64)).unwrap_or_else(dash)}</td>
            <td class:warning=r.status.is_some()>{r.status.clone().unwrap_or_else(|| "complete".into())}</td>
        </tr>
    }
}

#[component]
pub fn RankList(bundle: std::sync::Arc<Bundle>) -> impl IntoView {
    let ranks = &bundle.ranks;
    let first = ranks.first()?;
    let l = &first.layout;
    let hosts = {
        let mut h: Vec<&str> = ranks
            .iter()
            .filter_map(|r| r.layout.hostname.as_deref())
            .collect();
        h.sort_unstable();
        h.dedup();
        h.len()
    };
    let incomplete = ranks.iter().filter(|r| r.status.is_some()).count();
    let summary = format!(
        "{} ranks of world size {} on {} host{} · {} · sync {}{}{}",
        ranks.len(),
        l.world_size,
        hosts,
        if hosts == 1 { "" } else { "s" },
        l.launcher,
        l.sync,
        l.timeout_s
            .map(|t| format!(", timeout {t} s"))
            .unwrap_or_default(),
        if incomplete > 0 {
            format!(" · {incomplete} did not complete")
        } else {
            String::new()
        }
    );
    // A thousand rows are built only when asked for.
    let shown = RwSignal::new(ranks.len() <= 16);
    let rows = bundle.clone();
    Some(view! {
        <section class="rank-list">
            <h2>"Ranks"</h2>
            <p class="rank-summary">{summary}</p>
            <p class="job-note">"The tables give the job's figures: every rank's samples ÷ the slowest rank's epoch, the step time the slowest rank's. Each experiment's page shows every rank."</p>
            <button class="show-ranks" on:click=move |_| shown.update(|s| *s = !*s)>
                {move || if shown.get() { "Hide the ranks" } else { "Every rank and its host" }}
            </button>
            {move || shown.get().then(|| view! {
                <div class="table-scroll">
                    <table class="rank-table">
                        <thead>
                            <tr>
                                <th>"rank"</th><th>"node"</th><th>"local rank"</th><th>"host"</th>
                                <th>"CPU"</th><th>"cores"</th><th>"memory"</th><th>"status"</th>
                            </tr>
                        </thead>
                        <tbody>{rows.ranks.iter().map(row).collect_view()}</tbody>
                    </table>
                </div>
            })}
        </section>
    })
}
