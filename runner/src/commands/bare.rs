//! `stallscope bare-images SUITE` (hidden; `cargo xtask bench loader-peers`
//! runs it): the bare per-image function of the suite's image experiment in
//! a plain loop on one thread, after one unreported pass, printed as JSON:
//! per pass the rate without the stage clocks and with them (images
//! alternating), so the bench can set the loader against cores × this rate
//! and the clocks' cost against 1%.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::json;

use stallscope_core::suite::{ExperimentSpec, load};
use stallscope_loader::{BarePass, ImageDirSource, JpegDecoder, Source, SourceSpec, bare_pass};

#[derive(Debug, clap::Args)]
pub struct BareImagesArgs {
    /// The suite (TOML) whose loader experiment reads images.
    pub suite: PathBuf,
    /// The experiment's id (default: the first with an image source).
    #[arg(long)]
    pub experiment: Option<String>,
    /// Passes over the images (after one unreported), each alternating images without and with
    /// the stage clocks.
    #[arg(long, default_value_t = 4)]
    pub passes: u32,
    /// Override the suite's decoder: auto, libjpeg-turbo or zune-jpeg.
    #[arg(long)]
    pub decoder: Option<String>,
    /// Override the suite's scaled_decode.
    #[arg(long)]
    pub scaled_decode: Option<bool>,
}

pub fn run(args: &BareImagesArgs) -> anyhow::Result<ExitCode> {
    let plan = load(Some(&args.suite), None, false)?;
    let seeds = stallscope_core::seeds(&plan);
    let mut chosen = None;
    for e in &plan.experiments {
        if args.experiment.as_ref().is_some_and(|id| *id != e.id) {
            continue;
        }
        if let ExperimentSpec::Loader(lp) = &e.spec {
            let (spec, what) = stallscope_torch::source_spec(lp, seeds.data, None)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            if let Some(SourceSpec::Images(img)) = spec {
                chosen = Some((e.id.clone(), img, what));
                break;
            }
        }
    }
    let Some((id, mut img, what)) = chosen else {
        bail!(
            "{}: no loader experiment{} reads images",
            args.suite.display(),
            args.experiment
                .as_ref()
                .map_or(String::new(), |id| format!(" with id {id:?}"))
        );
    };
    if let Some(d) = &args.decoder {
        img.decoder = JpegDecoder::from_name(d).with_context(|| {
            format!("--decoder {d:?}: expected auto, libjpeg-turbo or zune-jpeg")
        })?;
    }
    if let Some(s) = args.scaled_decode {
        img.scaled_decode = s;
    }
    let source = ImageDirSource::open(&img)?;
    if source.files().len() < 2 {
        bail!(
            "{}: bare-images needs at least 2 images",
            args.suite.display()
        );
    }
    // One pass first, not reported: page cache, the decoder's library, buffers.
    bare_pass(&source, seeds.shuffle, 0)?;
    let mut passes = Vec::new();
    for p in 0..args.passes.max(1) {
        passes.push(bare_pass(&source, seeds.shuffle, u64::from(p % 2))?);
    }
    let rates = |f: fn(&BarePass) -> f64| -> Vec<f64> { passes.iter().map(f).collect() };
    let out = json!({
        "experiment": id,
        "source": what,
        "pipeline": source.describe(),
        "images": source.files().len(),
        "passes": passes,
        "untimed_images_per_s": rates(BarePass::untimed_images_per_s),
        "timed_images_per_s": rates(BarePass::timed_images_per_s),
    });
    crate::outln!("{}", serde_json::to_string_pretty(&out)?);
    Ok(ExitCode::SUCCESS)
}
