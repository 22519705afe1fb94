//! The ceiling the loader is held to: the per-image function (read, decode,
//! resize, crop, normalise) in a plain loop on one thread, no loader, no
//! queue, no collate; once without its stage clocks and once with them.

use std::time::Instant;

use serde::Serialize;

use super::images::ImageDirSource;
use super::rng::Rng;
use super::source::{SampleError, Source};
use super::stats::StageTimes;

/// One pass over every image.
#[derive(Debug, Clone, Serialize)]
pub struct Pass {
    /// Whether the stage clocks ran (as in the loader) or not.
    pub timed: bool,
    pub images: u64,
    pub seconds: f64,
    pub images_per_s: f64,
}

/// Every image once, in order, on this thread.
pub fn pass(source: &ImageDirSource, timed: bool, seed: u64) -> Result<Pass, SampleError> {
    let mut out = vec![0.0f32; source.sample_dims().iter().product()];
    let mut rng = Rng::new(seed);
    let mut times = StageTimes::default();
    let n = source.len() as u64;
    let start = Instant::now();
    for index in 0..n {
        if timed {
            source.load(index, &mut rng, &mut out, &mut times)?;
        } else {
            source.load_untimed(index, &mut rng, &mut out)?;
        }
        std::hint::black_box(&out);
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Pass {
        timed,
        images: n,
        seconds,
        images_per_s: n as f64 / seconds,
    })
}
