//! The browser tests: a site exported by the real `stallscope site` from the
//! published FashionMNIST bundle, a measured one and a bundle whose title is
//! HTML, one from the three engines and a generated merged multi-rank
//! bundle, a measured `stallscope job --tune` bundle and a second run of it
//! (another date and runner commit), served by `stallscope serve`, checked
//! in headless Chromium (plus a bundle of a newer format minor, loaded with
//! `?bundle=`). Each check is named, prints its own failure, and
//! screenshots go to `target/screenshots/`; the job page's first screen
//! also to `docs/img/viewer-job.png`, the README's picture.
mod ctx;
mod generated;
mod loading;
mod meeting;
mod newer_format;
mod peers;
mod ranks;
mod ranks_job;
mod reports;
mod your_job;

use super::site::{Server, export_site};
use ctx::*;

/// One browser test.
type Check = fn(&Ctx) -> Result<()>;

/// Every browser check, in the order they run.
const CHECKS: [(&str, Check); 24] = [
    ("site_lists_its_bundles", loading::site_lists_its_bundles),
    (
        "table_cells_equal_the_fixture",
        reports::table_cells_equal_the_fixture,
    ),
    ("sweet_spot_shown", reports::sweet_spot_shown),
    ("charts_drawn", reports::charts_drawn),
    ("explanation_present", reports::explanation_present),
    ("permalink_restores_view", reports::permalink_restores_view),
    (
        "malformed_bundle_shows_message_good_one_stays",
        loading::malformed_bundle_shows_message,
    ),
    (
        "too_large_bundle_refused",
        loading::too_large_bundle_refused,
    ),
    (
        "html_title_shown_as_text",
        loading::html_title_shown_as_text,
    ),
    ("dropped_file_is_loaded", loading::dropped_file_is_loaded),
    ("exports_table_and_chart", reports::exports_table_and_chart),
    ("oom_failure_explained", reports::oom_failure_explained),
    ("stall_attribution_shown", reports::stall_attribution_shown),
    (
        "compare_view_lists_differences",
        loading::compare_view_lists_differences,
    ),
    (
        "unknown_kind_shown_with_newer_format_note",
        newer_format::unknown_kind_shown_with_newer_format_note,
    ),
    ("engines_are_a_dimension", peers::engines_are_a_dimension),
    (
        "published_tutorial_pairs_with_yours",
        peers::published_tutorial_pairs_with_yours,
    ),
    (
        "rank_view_names_the_straggler",
        ranks::rank_view_names_the_straggler,
    ),
    (
        "job_and_sidecar_heat_map",
        ranks_job::job_and_sidecar_heat_map,
    ),
    (
        "job_page_answers_the_question",
        your_job::job_page_answers_the_question,
    ),
    (
        "job_headline_has_direction_and_unit",
        meeting::job_headline_has_direction_and_unit,
    ),
    (
        "every_column_within_reach_at_1280",
        meeting::every_column_within_reach_at_1280,
    ),
    (
        "units_agree_on_every_page",
        meeting::units_agree_on_every_page,
    ),
    (
        "compare_tells_the_sides_apart",
        meeting::compare_tells_the_sides_apart,
    ),
];

pub(super) fn run(repo: &Path, runner: &Path) -> Result<()> {
    let work = tempfile::Builder::new()
        .prefix("stallscope-browser-tests-")
        .tempdir()?;
    write_site(repo, runner, work.path())?;
    let shots = repo.join("target/screenshots");
    if shots.exists() {
        std::fs::remove_dir_all(&shots)
            .with_context(|| format!("cannot clear {}", shots.display()))?;
    }
    // Served from the folder above, so the site lives under a sub-path.
    let server = Server::start(runner, work.path())?;
    let published = read_json(&repo.join(PUBLISHED))?;
    let ctx = Ctx {
        browser: Browser::start(1280, 2400)?,
        url: format!("{}site", server.url),
        published_id: published["id"]
            .as_str()
            .context("published bundle has no id")?
            .to_string(),
        measured_id: read_json(&repo.join(MEASURED))?["id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        published,
        shots,
        repo: repo.to_path_buf(),
    };
    let (mut passed, mut failed) = (0, 0);
    // STALLSCOPE_BROWSER_CHECKS=a,b runs only those (all when unset).
    let only = std::env::var("STALLSCOPE_BROWSER_CHECKS").ok();
    let chosen = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|n| n.trim() == name))
    };
    for (name, check) in CHECKS.into_iter().filter(|(n, _)| chosen(n)) {
        match check(&ctx) {
            Ok(()) => {
                passed += 1;
                println!("browser test {name} ... ok");
            }
            Err(e) => {
                failed += 1;
                println!("browser test {name} ... FAILED: {e:#}");
                let _ = ctx
                    .browser
                    .screenshot(&ctx.shots.join(format!("failed-{name}.png")));
            }
        }
    }
    println!(
        "browser tests: {passed} passed, {failed} failed (screenshots in {})",
        ctx.shots.display()
    );
    drop(server);
    if failed > 0 {
        bail!("{failed} browser test(s) failed");
    }
    Ok(())
}

/// The site under `work/site`, exported by the real `stallscope site`,
/// with the extra files the loading checks fetch beside it.
fn write_site(repo: &Path, runner: &Path, work: &Path) -> Result<()> {
    let xss = work.join("xss-title.json");
    let mut b: Value = read_json(&repo.join("fixtures/measured/wgpu-quick.json"))?;
    b["title"] = json!(XSS_TITLE);
    b["id"] = json!(XSS_ID);
    std::fs::write(&xss, serde_json::to_vec_pretty(&b)?)?;
    let steps = work.join("steps.json");
    let mut generated = super::bench_viewer::generated_bundle(10_000, STEPS_ID);
    generated
        .experiments
        .push(generated::generated_stall_experiment());
    std::fs::write(&steps, serde_json::to_vec(&generated)?)?;
    let merged = work.join("ranks.json");
    std::fs::write(
        &merged,
        serde_json::to_vec(&crate::web::rank_bundles::merged_bundle(
            &ranks::SPEC,
            ranks::RANKS_ID,
        )?)?,
    )?;
    let [job, single] = ranks_job::write_bundles(work)?;
    let second_job = meeting::write_second_job(repo, work)?;
    let site = work.join("site");
    export_site(
        runner,
        &[
            repo.join(PUBLISHED),
            repo.join(MEASURED),
            xss,
            steps,
            repo.join(peers::PEERS),
            repo.join(peers::TUTORIAL),
            repo.join(peers::TUTORIAL_RUN),
            repo.join(your_job::JOB),
            merged,
            job,
            single,
            second_job,
        ],
        &site,
    )?;
    std::fs::create_dir_all(site.join("extra"))?;
    std::fs::copy(
        repo.join("fixtures/bad/truncated.json"),
        site.join("extra/truncated.json"),
    )?;
    std::fs::copy(
        repo.join(newer_format::NEWER_MINOR_FIXTURE),
        site.join(newer_format::NEWER_MINOR_SITE_PATH),
    )?;
    // One byte over the limit: refused before it is parsed.
    std::fs::write(
        site.join("extra/huge.json"),
        vec![b' '; stallscope_bundle::MAX_BUNDLE_BYTES + 1],
    )?;
    Ok(())
}
