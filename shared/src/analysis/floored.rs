//! The verdict of an experiment that carries an A/A noise floor (a job's
//! `--sweep` or `--tune`: your settings run twice): a configuration is
//! "faster" only when its interval over the repeats clears the floor, and
//! two runs of the same settings read "no measurable difference". The
//! spread rule of `verdict` stays for every other experiment.

use crate::analysis::noise::{
    RatioDifference, RatioOf, RatioVerdict, compare_configurations, job_noise_floor,
};
use crate::analysis::units::{show_percent, show_ratio};
use crate::format::{Experiment, NoiseFloor, Phase};

/// The floor-aware headline and the figure it rests on (whole-run), and
/// the baseline's id, or `None` when `e` has no A/A floor.
pub fn floored_verdict(e: &Experiment, phase: Phase) -> Option<(String, String, String)> {
    let floor = job_noise_floor(e)?;
    let base = floor.a.clone();
    let judged: Vec<(String, RatioVerdict)> = e
        .configurations
        .iter()
        .filter(|c| c.id != base && c.id != floor.b && c.failure.is_none())
        .filter_map(|c| {
            let v = compare_configurations(e, &base, &c.id, &floor, RatioOf::Rate)?;
            Some((c.label.clone(), v))
        })
        .collect();
    let mut faster: Vec<&(String, RatioVerdict)> = judged
        .iter()
        .filter(|(_, v)| v.difference == RatioDifference::Higher)
        .collect();
    faster.sort_by(|a, b| b.1.interval.median.total_cmp(&a.1.interval.median));
    let headline = match faster.as_slice() {
        [] => none_faster(&floor, &judged),
        [(label, v)] => format!(
            "Faster than your settings beyond the noise: {label}, {} the whole-run samples/s \
             (interval {}–{} over {} repeats; the noise floor, your settings run twice, is {}).",
            show_ratio(v.interval.median),
            show_ratio(v.interval.low),
            show_ratio(v.interval.high),
            v.interval.n,
            show_percent(floor.rate_floor)
        ),
        many => {
            let names: Vec<String> = many
                .iter()
                .map(|(l, v)| format!("{l} ({})", show_ratio(v.interval.median)))
                .collect();
            format!(
                "Faster than your settings beyond the {} noise floor: {} (whole-run samples/s).",
                show_percent(floor.rate_floor),
                names.join(", ")
            )
        }
    };
    let figure = format!(
        "whole-run {} samples/s, repeat by repeat against your settings, judged against the A/A \
         floor of {} ({} pairs)",
        phase.as_str(),
        show_percent(floor.rate_floor),
        floor.rate_ratios.len()
    );
    Some((headline, figure, base))
}

/// Nothing clears the floor.
fn none_faster(floor: &NoiseFloor, judged: &[(String, RatioVerdict)]) -> String {
    let f = show_percent(floor.rate_floor);
    if judged.is_empty() {
        return format!(
            "No measurable difference: your settings run twice (A/A) were within {f} of each \
             other, this job's noise floor."
        );
    }
    let open = judged.iter().filter(|(_, v)| !v.resolved).count();
    let tail = if open > 0 {
        format!(" ({open} not resolved: more repeats may tell)")
    } else {
        String::new()
    };
    format!(
        "No measurable difference: no configuration is faster than your settings beyond the {f} \
         noise floor (your settings run twice, A/A){tail}."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::noise::tests::config;
    use crate::analysis::verdict as verdict_of;
    use crate::format::ExperimentKind;

    fn job(configs: Vec<crate::format::Configuration>) -> Experiment {
        let mut e =
            Experiment::new("job", ExperimentKind::Loader, "job").with_configurations(configs);
        e.baseline = Some("script".into());
        e
    }

    #[test]
    fn your_settings_run_twice_are_no_measurable_difference() {
        let cpu = [1.0; 4];
        let e = job(vec![
            config("script", &[100.0, 104.0, 98.0, 101.0], &cpu),
            config("script-again", &[103.0, 99.0, 101.0, 100.0], &cpu),
        ]);
        let v = verdict_of(&e).expect("a verdict");
        assert!(
            v.headline.starts_with("No measurable difference"),
            "{}",
            v.headline
        );
        assert!(!v.headline.contains("Fastest"), "{}", v.headline);
    }

    #[test]
    fn a_point_inside_the_floor_is_no_difference_and_one_past_it_is_faster() {
        let cpu = [1.0; 4];
        let inside = job(vec![
            config("script", &[100.0, 104.0, 98.0, 101.0], &cpu),
            config("script-again", &[104.0, 99.0, 102.0, 100.0], &cpu),
            config("w2", &[102.0, 103.0, 99.0, 102.0], &cpu),
        ]);
        let v = verdict_of(&inside).unwrap();
        assert!(
            v.headline.starts_with("No measurable difference"),
            "{}",
            v.headline
        );
        let past = job(vec![
            config("script", &[100.0, 104.0, 98.0, 101.0], &cpu),
            config("script-again", &[104.0, 99.0, 102.0, 100.0], &cpu),
            config("w2", &[200.0, 210.0, 196.0, 203.0], &cpu),
        ]);
        let v = verdict_of(&past).unwrap();
        assert!(
            v.headline
                .starts_with("Faster than your settings beyond the noise: w2, 2.0"),
            "{}",
            v.headline
        );
        assert_eq!(v.mode, Some(crate::format::TimingMode::WholeRun));
    }
    /// The cost sentence follows the same floor: a CPU ratio inside the
    /// A/A's CPU spread is no difference, one past it costs less.
    #[test]
    fn the_cost_sentence_is_judged_against_the_floor_too() {
        let rates = [200.0, 210.0, 196.0, 203.0];
        let with_cpu = |cpu: [f64; 4]| {
            job(vec![
                config(
                    "script",
                    &[100.0, 104.0, 98.0, 101.0],
                    &[1.0, 1.1, 0.95, 1.0],
                ),
                config(
                    "script-again",
                    &[104.0, 99.0, 102.0, 100.0],
                    &[1.05, 0.97, 1.0, 1.02],
                ),
                config("w2", &rates, &cpu),
            ])
        };
        let v = verdict_of(&with_cpu([0.98, 1.06, 0.97, 1.0])).unwrap();
        assert!(
            v.headline.contains("samples/s beyond the")
                && v.headline.contains("no measurable difference in CPU"),
            "{}",
            v.headline
        );
        let v = verdict_of(&with_cpu([0.5, 0.55, 0.48, 0.5])).unwrap();
        assert!(
            v.headline.contains("costs less CPU beyond the"),
            "{}",
            v.headline
        );
        assert!(!v.headline.contains("script-again:"), "{}", v.headline);
    }
}
