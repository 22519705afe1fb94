//! The machine and software a bundle recorded, as a two-column table.

use leptos::prelude::*;
use stallscope_bundle::Bundle;
use stallscope_bundle::analysis::show_bytes;

/// The environment as (label, value) pairs, in reading order; shared by the
/// bundle page and the compare view's differences.
pub fn environment_facts(b: &Bundle) -> Vec<(&'static str, String)> {
    let e = &b.environment;
    let mut facts: Vec<(&'static str, String)> = Vec::new();
    let mut push = |label: &'static str, value: Option<String>| {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            facts.push((label, v));
        }
    };
    if let Some(h) = &e.host {
        push("CPU", h.cpu_model.clone());
        push("logical cores", h.logical_cores.map(|c| c.to_string()));
        push("host memory", h.memory_bytes.map(|m| show_bytes(m as f64)));
        push("OS", h.os.clone());
        push("kernel", h.kernel.clone());
    }
    if let Some(r) = &e.rank {
        push(
            "rank",
            Some(format!(
                "{} of {} (local {}{}), {}, sync {}",
                r.rank,
                r.world_size,
                r.local_rank,
                r.node.map(|n| format!(", node {n}")).unwrap_or_default(),
                r.launcher,
                r.sync
            )),
        );
        push("rank host", r.hostname.clone());
    }
    if let Some(d) = &e.device {
        push("device", Some(format!("{} ({})", d.name, d.kind.as_str())));
        push(
            "device memory",
            d.memory_total_bytes.map(|m| show_bytes(m as f64)),
        );
        push("driver", d.driver.clone());
        push("CUDA runtime", d.cuda_runtime.clone());
        push("compute capability", d.compute_capability.clone());
        push("backend", d.backend.clone());
        push("device type", d.device_type.clone());
    }
    if let Some(t) = &e.libtorch {
        push("libtorch", Some(t.version.clone()));
        push("libtorch CUDA", t.cuda.clone());
        push("cuDNN", t.cudnn.clone());
    }
    if let Some(w) = &e.wgpu {
        push("wgpu", Some(w.version.clone()));
        push("wgpu adapter", w.adapter.clone());
    }
    if let Some(t) = &e.threads {
        push(
            "torch intra-op threads",
            t.torch_intra_op.map(|n| n.to_string()),
        );
        push(
            "torch inter-op threads",
            t.torch_inter_op.map(|n| n.to_string()),
        );
    }
    if let Some(p) = &e.precision {
        push(
            "precision",
            Some(format!(
                "{}, TF32 matmul {}, TF32 cuDNN {}",
                p.dtype,
                on_off(p.tf32_matmul),
                on_off(p.tf32_cudnn)
            )),
        );
    }
    if let Some(s) = &e.seeds {
        push(
            "seeds",
            Some(format!(
                "weights {}, shuffle {}, data {}",
                s.weights, s.shuffle, s.data
            )),
        );
    }
    if let Some(r) = &e.runner {
        let commit = r
            .commit
            .as_ref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        push("runner", Some(format!("{} {}{commit}", r.name, r.version)));
    }
    if let Some(s) = &e.suite {
        push("suite", Some(s.name.clone()));
    }
    if !e.command_line.is_empty() {
        push("command line", Some(e.command_line.join(" ")));
    }
    facts
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

#[component]
pub fn Environment(bundle: std::sync::Arc<Bundle>) -> impl IntoView {
    let facts = environment_facts(&bundle);
    let empty = facts.is_empty();
    view! {
        <section class="environment">
            <h3>"Machine and software"</h3>
            {empty.then(|| view! { <p class="muted">"The bundle records nothing about the machine."</p> })}
            <table class="facts">
                <tbody>
                    {facts
                        .into_iter()
                        .map(|(label, value)| view! { <tr><th>{label}</th><td>{value}</td></tr> })
                        .collect_view()}
                </tbody>
            </table>
        </section>
    }
}
