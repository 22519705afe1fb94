//! A job configuration whose training thread's wait was not seen
//! (`wait_method` `unseen`: its batches came through a path the hooks do
//! not cover) has no wait figure anywhere: no wait share in the table or
//! the verdict, and the closing says why and what measures the loader
//! instead. `partial` keeps the figure and calls it a lower bound.

use std::path::Path;

use stallscope_bundle::analysis::{
    JOB_ID, JOB_SCRIPT_ID, Metric, MetricKey, WAIT_METHOD_PARAM, job_closing, metric_value,
    preferred_phase,
};
use stallscope_bundle::*;

fn job_fixture(method: Option<&str>) -> Bundle {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/measured/cpu-job-tune.json");
    let mut b = read_bundle(&std::fs::read(path).unwrap()).unwrap();
    if let Some(m) = method {
        let e = b.experiments.iter_mut().find(|e| e.id == JOB_ID).unwrap();
        let own = e
            .configurations
            .iter_mut()
            .find(|c| c.id == JOB_SCRIPT_ID)
            .unwrap();
        own.params
            .insert(WAIT_METHOD_PARAM.into(), ParamValue::Text(m.into()));
    }
    b
}

fn own_wait_share(b: &Bundle) -> Option<f64> {
    let e = b.experiment(JOB_ID).unwrap();
    let key = MetricKey::new(
        Metric::WaitShare,
        TimingMode::Diagnostic,
        preferred_phase(e),
    );
    metric_value(e.configuration(JOB_SCRIPT_ID).unwrap(), &key)
}

#[test]
fn an_unseen_wait_has_no_figure_and_says_why() {
    let seen = job_fixture(Some("training_thread"));
    assert!(own_wait_share(&seen).is_some_and(|w| w > 0.5));
    assert!(!job_closing(&seen).iter().any(|p| p.contains("seen")));

    let unseen = job_fixture(Some("unseen"));
    assert_eq!(own_wait_share(&unseen), None);
    let closing = job_closing(&unseen).join("\n");
    assert!(
        closing.starts_with("Not seen: your training thread's batches came through a path"),
        "{closing}"
    );
    assert!(
        closing.contains("measures the loader by difference"),
        "{closing}"
    );

    let partial = job_fixture(Some("partial"));
    assert_eq!(own_wait_share(&partial), own_wait_share(&seen));
    let closing = job_closing(&partial).join("\n");
    assert!(
        closing.contains("the wait share is a lower bound"),
        "{closing}"
    );
}
