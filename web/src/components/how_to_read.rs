//! "How to read this": synchronized vs whole-run explained with the bundle's
//! own numbers (the overlap the barriers removed), why a diagnostic samples/s
//! is not performance, cold vs steady epochs, and what the sweet spot means.

use std::sync::Arc;

use leptos::prelude::*;
use stallscope_bundle::analysis::{
    DEFAULT_SWEET_SPOT_THRESHOLD, Metric, MetricKey, barrier_overhead, bundle_title,
    group_thousands, metric_value, show_bytes, show_percent, sweet_spot,
};
use stallscope_bundle::{Bundle, Phase, TimingMode};

use crate::components::missing::Missing;
use crate::components::provenance::Provenance;
use crate::route::Route;
use crate::state::AppState;

#[component]
pub fn HowToRead(key: String) -> impl IntoView {
    let state = expect_context::<AppState>();
    move || match state.bundle(&key) {
        None => view! { <Missing key=key.clone()/> }.into_any(),
        Some(l) => page(l.bundle).into_any(),
    }
}

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

fn rate(r: f64) -> String {
    format!("{} samples/s", group_thousands(&format!("{r:.0}")))
}

/// The barriers' cost in this bundle: its first configuration measured in both modes.
fn barrier_text(b: &Bundle) -> String {
    // The first configuration with both modes gives the barrier figure.
    let overhead = b.experiments.iter().find_map(|e| {
        e.configurations.iter().find_map(|c| {
            [Phase::Steady, Phase::Cold]
                .into_iter()
                .find_map(|p| barrier_overhead(c, p))
                .map(|o| (e.title.clone(), c.label.clone(), o))
        })
    });
    match &overhead {
        Some((exp, cfg, o)) if o.per_step_s <= 0.0 => format!(
            "In this bundle, “{exp}” at {cfg}: the diagnostic epoch ({:.3} s) was not slower than the whole-run epoch ({:.3} s), so the barriers removed no measurable overlap there — the stages hardly overlap in that configuration.",
            o.diagnostic_epoch_s, o.whole_run_epoch_s
        ),
        Some((exp, cfg, o)) => {
            let mut t = format!(
                "In this bundle, “{exp}” at {cfg}: the whole-run epoch took {:.3} s and the diagnostic epoch {:.3} s over {} steps — the barriers added {} per step, time in which loading, copying and computing would otherwise overlap.",
                o.whole_run_epoch_s,
                o.diagnostic_epoch_s,
                group_thousands(&format!("{:.0}", o.steps)),
                ms(o.per_step_s)
            );
            if let (Some(w), Some(d)) = (o.whole_run_samples_per_s, o.diagnostic_samples_per_s) {
                t.push_str(&format!(
                    " The diagnostic run's {} is therefore not comparable with the whole-run {}.",
                    rate(d),
                    rate(w)
                ));
            }
            t
        }
        None => "This bundle has no configuration measured in both modes, so it gives no barrier figure of its own; the rule holds all the same.".to_string(),
    }
}

/// The first epoch against the steady ones in this bundle.
fn cold_text(b: &Bundle) -> String {
    let cold_steady = b.experiments.iter().find_map(|e| {
        e.configurations.iter().find_map(|c| {
            let k = |p| MetricKey::new(Metric::EpochS, TimingMode::WholeRun, p);
            Some((
                e.title.clone(),
                c.label.clone(),
                metric_value(c, &k(Phase::Cold))?,
                metric_value(c, &k(Phase::Steady))?,
            ))
        })
    });
    match &cold_steady {
        Some((exp, cfg, cold, steady)) => format!(
            "In this bundle, “{exp}” at {cfg}: the first epoch took {cold:.3} s and the steady epochs {steady:.3} s (whole-run medians)."
        ),
        None => "This bundle does not have both a first and a steady epoch for one configuration."
            .to_string(),
    }
}

/// The sweet spot in this bundle, a batch sweep first.
fn spot_text(b: &Bundle) -> String {
    // A batch sweep first: that is what the sweet spot is about.
    let mut sweeps: Vec<&stallscope_bundle::Experiment> = b.experiments.iter().collect();
    sweeps.sort_by_key(|e| e.kind != stallscope_bundle::ExperimentKind::BatchSweep);
    let spot = sweeps
        .into_iter()
        .find_map(|e| sweet_spot(e, DEFAULT_SWEET_SPOT_THRESHOLD).map(|s| (e.title.clone(), s)));

    match &spot {
        Some((exp, s)) if s.config_id == s.best_config_id => format!(
            "In this bundle, “{exp}”: the best whole-run throughput is at {} {} ({}), and no smaller value reaches {:.0}% of it, so the sweet spot is the best itself.",
            s.param,
            s.value,
            rate(s.best_rate),
            s.threshold * 100.0
        ),
        Some((exp, s)) => {
            let mem = match (s.memory_bytes, s.best_memory_bytes, s.memory_metric) {
                (Some(a), Some(bm), Some(m)) => format!(
                    " It needs {} of {} where the best needs {}.",
                    show_bytes(a),
                    m.label(),
                    show_bytes(bm)
                ),
                _ => String::new(),
            };
            format!(
                "In this bundle, “{exp}”: {} {} reaches {} of the best whole-run throughput ({} {}, {}).{mem}",
                s.param,
                s.value,
                show_percent(s.fraction_of_best),
                s.param,
                s.best_value,
                rate(s.best_rate)
            )
        }
        None => "This bundle has no sweep with whole-run throughput to find a sweet spot in."
            .to_string(),
    }
}

fn page(b: Arc<Bundle>) -> impl IntoView {
    let (barrier_text, cold_text, spot_text) = (barrier_text(&b), cold_text(&b), spot_text(&b));
    view! {
        <article class="how-to-read">
            <nav class="crumbs">
                <a href=Route::Library.to_hash()>"library"</a> " › "
                <a href=Route::Bundle { bundle: b.id.clone() }.to_hash()>{bundle_title(&b)}</a> " › how to read this"
            </nav>
            <h1>"How to read this report"</h1>
            <p class="meta"><Provenance bundle=b.clone() compact=true/></p>
            <h2>"Two timing modes, never mixed"</h2>
            <p>
                "A GPU (or a wgpu device) works asynchronously: a launch returns before the work is done, so a clock read around it measures submission. stallscope therefore times every configuration twice. "
                <b>"Whole-run"</b> " synchronizes once before and once after the epoch: everything overlaps as in real training, and this is the figure that says whether a change helped. "
                <b>"Diagnostic — synchronized at every stage"</b> " puts a barrier after next(), after the copy and after the step: it shows which stage waits, but the barriers remove the overlap."
            </p>
            <p class="own-numbers barrier">{barrier_text}</p>
            <h2>"Why a diagnostic samples/s is not performance"</h2>
            <p>
                "With barriers, the loader cannot prepare the next batch while the device computes, and the copy cannot overlap the previous step. The diagnostic epoch is slower by design, and the sum of its stages is not the whole-run step time. Read the diagnostic figures for where the step waits (next-wait vs transfer vs compute); read the whole-run figures for how fast it is."
            </p>
            <h2>"Cold first epoch vs steady epochs"</h2>
            <p>
                "The first epoch pays for starting workers, first reads and cold caches; the first next() wait is reported apart from the mean. Steady epochs are what a long run sees."
            </p>
            <p class="own-numbers cold">{cold_text}</p>
            <h2>"The sweet spot"</h2>
            <p>
                "Throughput rises with the batch size and then plateaus while memory keeps growing. The sweet spot is the smallest swept value whose whole-run throughput reaches 95% of the best measured: beyond it you pay memory for little speed. A larger batch also changes the optimisation (fewer steps per epoch), which throughput does not measure."
            </p>
            <p class="own-numbers sweet-spot">{spot_text}</p>
            <h2>"Repeats and noise"</h2>
            <p>
                "Every configuration is repeated (3 by default, in alternating order) and shown as the median with min–max; (! N%) flags a spread (max − min over the median) above 10%, where a difference of a few percent means nothing."
            </p>
        </article>
    }
}
