//! Forecasts from a measured window (docs/methodology.md, "Forecasts"):
//! the shared memory the DataLoader keeps in flight, each worker's private
//! memory at the end of a full epoch and across epochs (its growth per
//! sample read, extrapolated), and the total against the memory limit;
//! each figure with its basis as a sentence, and a verdict: it fits, or it
//! would not and why. Pure functions of [`ForecastInputs`] and
//! [`HostLimits`], so `validate` recomputes what a bundle stores.

use crate::analysis::summary::median;
use crate::analysis::units::show_bytes;
use crate::format::{
    CopyOnRead, Failure, Forecast, ForecastFigure, ForecastInputs, HostLimits, Resource,
};

mod inputs;

pub use inputs::forecast_inputs;

/// PyTorch's `prefetch_factor` when a loader with workers sets none.
pub const DEFAULT_PREFETCH_FACTOR: u32 = 2;

/// How far a worker's USS moves over a window without growing (the
/// allocator's arenas, the batches it holds before the main process maps
/// them), at least: growth is named only above the larger of this and two
/// batches per prefetch slot.
pub const GROWTH_NOISE_MIN_BYTES: f64 = 4.0 * 1024.0 * 1024.0;

/// The known fixes of copy-on-read, one sentence.
pub const COPY_ON_READ_ADVICE: &str = "keep the samples in NumPy arrays or bytes instead of \
     Python lists, dicts or objects (reading a Python object writes its reference count, so a \
     forked worker copies every page it reads), or start the workers with the spawn method";

/// The forecast of a window's `inputs` against `limits`.
pub fn forecast(inputs: &ForecastInputs, limits: Option<&HostLimits>) -> Forecast {
    let shm = shm_in_flight(inputs, limits);
    let pinned = pinned(inputs);
    let growth = growth_per_sample(inputs);
    let copy_on_read = copy_on_read(inputs, growth);
    let cor = copy_on_read.is_some();
    let worker_epoch_end = worker_end(inputs, growth, Horizon::Epoch, cor);
    let worker_across_epochs = worker_end(inputs, growth, Horizon::AcrossEpochs, cor)
        .filter(|a| worker_epoch_end.as_ref().is_some_and(|e| a.bytes > e.bytes));
    let extra = shm.as_ref().map_or(0, |f| f.bytes) + pinned.as_ref().map_or(0, |f| f.bytes);
    let total = |h| memory_total(inputs, limits, growth, h, extra);
    let memory_epoch_end = total(Horizon::Epoch);
    let memory_across_epochs = worker_across_epochs
        .as_ref()
        .and_then(|_| total(Horizon::AcrossEpochs));
    let held: Vec<&ForecastFigure> = [&shm, &memory_epoch_end, &memory_across_epochs]
        .into_iter()
        .flatten()
        .filter(|f| f.limit_bytes.is_some())
        .collect();
    let fits = (!held.is_empty()).then(|| held.iter().all(|f| fits(f)));
    let verdict = verdict_sentence(&held);
    let mut out = Forecast {
        inputs: inputs.clone(),
        shm_in_flight: shm,
        pinned,
        worker_growth_per_sample_bytes: growth,
        worker_epoch_end,
        worker_across_epochs,
        memory_epoch_end,
        memory_across_epochs,
        copy_on_read,
        fits,
        verdict,
    };
    if let Some(why) = unsure_misfit(&out) {
        out.verdict = out.verdict.replacen("would not fit: ", "may not fit: ", 1) + &why;
    }
    out
}

fn fits(f: &ForecastFigure) -> bool {
    f.limit_bytes.is_none_or(|l| f.bytes <= l)
}

/// The first figure that would not fit, as the failure of a configuration
/// that is therefore not run. A memory total counts only when it would not
/// fit even at the workers' growth less the noise ([`memory_floor`]): a
/// growth the window cannot tell from the noise, extrapolated over a long
/// epoch, is no reason to skip a configuration (a `FakeData` script's
/// +30 KiB per sample over 120 samples per worker made 38 GiB by the end of
/// a 1.28 M-sample epoch); the configuration runs, and a crash is recorded
/// as one.
pub fn would_not_fit(f: &Forecast) -> Option<Failure> {
    let figures = [
        (Resource::SharedMemory, &f.shm_in_flight, None),
        (Resource::Memory, &f.memory_epoch_end, Some(Horizon::Epoch)),
        (
            Resource::Memory,
            &f.memory_across_epochs,
            Some(Horizon::AcrossEpochs),
        ),
    ];
    figures.into_iter().find_map(|(resource, fig, horizon)| {
        let fig = fig.as_ref()?;
        let limit = fig.limit_bytes.filter(|l| fig.bytes > *l)?;
        if horizon.is_some_and(|h| memory_floor(f, h).is_some_and(|b| b <= limit)) {
            return None;
        }
        Some(Failure::WouldNotFit {
            resource,
            needed_bytes: fig.bytes,
            available_bytes: limit,
            message: format!("would not fit: {}", fig.basis),
        })
    })
}

/// The memory total at horizon `h` with each worker growing by the window's
/// median growth less the noise ([`growth_noise`] over the samples it read),
/// none when that is negative: the least the window can vouch for.
fn memory_floor(f: &Forecast, h: Horizon) -> Option<u64> {
    let i = &f.inputs;
    let main = i.main_rss_bytes?;
    let extra =
        f.shm_in_flight.as_ref().map_or(0, |x| x.bytes) + f.pinned.as_ref().map_or(0, |x| x.bytes);
    let workers: u64 = if i.workers == 0 {
        0
    } else {
        worker_bytes(i, floor_growth(f)?, h)?.iter().sum()
    };
    Some(main.saturating_add(workers).saturating_add(extra))
}

fn floor_growth(f: &Forecast) -> Option<f64> {
    let per_worker = window_samples_per_worker(&f.inputs)?;
    let g = f.worker_growth_per_sample_bytes?;
    Some((g - growth_noise(&f.inputs) / per_worker).max(0.0))
}

/// A memory total that would not fit only by a growth inside the noise: the
/// verdict's closing clause, which says so (the verdict then opens "may not
/// fit", and [`would_not_fit`] does not skip the configuration).
fn unsure_misfit(f: &Forecast) -> Option<String> {
    let misfit = |fig: &Option<ForecastFigure>| fig.as_ref().is_some_and(|x| !fits(x));
    let unsure = (misfit(&f.memory_epoch_end) || misfit(&f.memory_across_epochs))
        && would_not_fit(f).is_none();
    if !unsure {
        return None;
    }
    let per_worker = window_samples_per_worker(&f.inputs)?;
    let window = f.worker_growth_per_sample_bytes? * per_worker;
    Some(format!(
        "; but the workers' growth over the window ({} each over {:.0} samples) is within the \
         {} a worker's memory moves anyway: the window cannot tell it from no growth (a longer \
         window, `--steps`, would)",
        show_bytes(window),
        per_worker,
        show_bytes(growth_noise(&f.inputs))
    ))
}

fn prefetch(i: &ForecastInputs) -> u64 {
    u64::from(i.prefetch_factor.unwrap_or(DEFAULT_PREFETCH_FACTOR))
}

/// Batches in `/dev/shm`: workers × prefetch_factor, plus the one the step
/// holds unless it is a pinned copy.
fn shm_in_flight(i: &ForecastInputs, limits: Option<&HostLimits>) -> Option<ForecastFigure> {
    let b = i.batch_bytes.filter(|_| i.workers > 0)?;
    let held = u64::from(!i.pin_memory);
    let batches = u64::from(i.workers) * prefetch(i) + held;
    let bytes = batches.saturating_mul(b);
    let limit_bytes = limits.and_then(|l| l.shm_free_bytes);
    let step = if held == 1 {
        ", plus the batch the step holds"
    } else {
        ""
    };
    let against = match (limit_bytes, limits.and_then(|l| l.shm_total_bytes)) {
        (Some(free), Some(total)) => format!(
            ", against {} free of {} in /dev/shm",
            show_bytes(free as f64),
            show_bytes(total as f64)
        ),
        (Some(free), None) => format!(", against {} free in /dev/shm", show_bytes(free as f64)),
        _ => String::new(),
    };
    Some(ForecastFigure {
        bytes,
        limit_bytes,
        basis: format!(
            "{} of shared memory in flight ({} worker{} × prefetch_factor {} × {} batches{step}){against}",
            show_bytes(bytes as f64),
            i.workers,
            if i.workers == 1 { "" } else { "s" },
            prefetch(i),
            show_bytes(b as f64),
        ),
    })
}

/// Page-locked copies: every batch in flight and the step's, at most.
fn pinned(i: &ForecastInputs) -> Option<ForecastFigure> {
    let b = i.batch_bytes.filter(|_| i.pin_memory)?;
    let batches = u64::from(i.workers) * prefetch(i) + 1;
    let bytes = batches.saturating_mul(b);
    Some(ForecastFigure {
        bytes,
        limit_bytes: None,
        basis: format!(
            "{} pinned (page-locked) at most: {batches} batches of {} (pin_memory)",
            show_bytes(bytes as f64),
            show_bytes(b as f64)
        ),
    })
}

/// Samples each worker read in the window (the loader hands batches to
/// its workers in turn).
fn window_samples_per_worker(i: &ForecastInputs) -> Option<f64> {
    (i.workers > 0 && i.samples_in_window > 0)
        .then(|| i.samples_in_window as f64 / f64::from(i.workers))
}

/// The median over workers of (USS at close − USS at open) ÷ samples read.
fn growth_per_sample(i: &ForecastInputs) -> Option<f64> {
    let per_worker = window_samples_per_worker(i)?;
    let growth: Vec<f64> = i
        .workers_uss
        .iter()
        .map(|w| (w.uss_bytes as f64 - w.uss_at_open_bytes as f64) / per_worker)
        .collect();
    median(&growth)
}

/// How far a worker's USS moves over a window without growing: the larger
/// of [`GROWTH_NOISE_MIN_BYTES`] and two batches per prefetch slot.
fn growth_noise(i: &ForecastInputs) -> f64 {
    let batch = i.batch_bytes.unwrap_or(0) as f64;
    GROWTH_NOISE_MIN_BYTES.max(2.0 * prefetch(i) as f64 * batch)
}

/// Copy-on-read: every worker grew, the median growth over the window is
/// clearly above the noise, and the workers were forked.
fn copy_on_read(i: &ForecastInputs, growth: Option<f64>) -> Option<CopyOnRead> {
    let g = growth?;
    let per_worker = window_samples_per_worker(i)?;
    let noise = growth_noise(i);
    let every_worker_grew = i
        .workers_uss
        .iter()
        .all(|w| w.uss_bytes > w.uss_at_open_bytes);
    let forked = i.start_method.as_deref().is_none_or(|m| m == "fork");
    (forked && every_worker_grew && g * per_worker > noise).then(|| CopyOnRead {
        bytes_per_sample: g,
        advice: format!("copy-on-read: {COPY_ON_READ_ADVICE}"),
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Horizon {
    Epoch,
    AcrossEpochs,
}

/// Samples a worker has still to read by the horizon, from the close.
fn remaining_per_worker(i: &ForecastInputs, h: Horizon) -> Option<f64> {
    let n = i.dataset_len? as f64;
    let w = f64::from(i.workers);
    if w == 0.0 {
        return None;
    }
    let read = (i.samples_before_window + i.samples_in_window) as f64 / w;
    let goal = match h {
        Horizon::Epoch => (n / w).ceil(),
        // Persistent workers under a shuffling sampler come to read every
        // sample; restarted workers, or the same samples each epoch, do not.
        Horizon::AcrossEpochs if i.persistent_workers && i.shuffle != Some(false) => n,
        Horizon::AcrossEpochs => return None,
    };
    Some((goal - read).max(0.0))
}

/// Each worker's USS at the horizon: its close plus the median growth
/// (none when negative) × the samples it has still to read.
fn worker_bytes(i: &ForecastInputs, growth: f64, h: Horizon) -> Option<Vec<u64>> {
    let remaining = remaining_per_worker(i, h)?;
    (!i.workers_uss.is_empty()).then(|| {
        i.workers_uss
            .iter()
            .map(|w| (w.uss_bytes as f64 + growth.max(0.0) * remaining).round() as u64)
            .collect()
    })
}

fn worker_end(
    i: &ForecastInputs,
    growth: Option<f64>,
    h: Horizon,
    copy_on_read: bool,
) -> Option<ForecastFigure> {
    let g = growth?;
    let bytes = *worker_bytes(i, g, h)?.iter().max()?;
    let when = match h {
        Horizon::Epoch => "by the epoch's end",
        Horizon::AcrossEpochs => "once each has read every sample (persistent workers)",
    };
    let why = if copy_on_read { ", copy-on-read" } else { "" };
    let rate = if g > 0.0 {
        format!("+{} per sample read{why}", show_bytes(g))
    } else {
        "no growth per sample read".to_string()
    };
    // Shuffled reads meet pages a worker already copied more and more as
    // the epoch goes on: the growth of an early window overstates the rest.
    let bound = if i.shuffle == Some(true) && g > 0.0 {
        " (an upper bound: shuffled reads touch pages already copied as the epoch goes on)"
    } else {
        ""
    };
    Some(ForecastFigure {
        bytes,
        limit_bytes: None,
        basis: format!(
            "workers reach ~{} each {when}: {rate}{bound}",
            show_bytes(bytes as f64)
        ),
    })
}

/// The main process, every worker at the horizon, and the shared and
/// pinned memory in flight, against the memory limit.
fn memory_total(
    i: &ForecastInputs,
    limits: Option<&HostLimits>,
    growth: Option<f64>,
    h: Horizon,
    extra: u64,
) -> Option<ForecastFigure> {
    let main = i.main_rss_bytes?;
    let workers: u64 = if i.workers == 0 {
        0
    } else {
        worker_bytes(i, growth?, h)?.iter().sum()
    };
    let bytes = main.saturating_add(workers).saturating_add(extra);
    let limit_bytes = limits.and_then(|l| l.memory_limit_bytes);
    let when = match h {
        Horizon::Epoch if i.workers == 0 => "in the window",
        Horizon::Epoch => "by the epoch's end",
        Horizon::AcrossEpochs => "across epochs",
    };
    let mut parts = vec![format!("main {}", show_bytes(main as f64))];
    if i.workers > 0 {
        parts.push(format!(
            "{} workers {}",
            i.workers,
            show_bytes(workers as f64)
        ));
    }
    if extra > 0 {
        parts.push(format!("batches in flight {}", show_bytes(extra as f64)));
    }
    let against = limit_bytes.map_or(String::new(), |l| {
        format!(", against {}", limit_phrase(l, limits))
    });
    Some(ForecastFigure {
        bytes,
        limit_bytes,
        basis: format!(
            "{} of memory {when} ({}){against}",
            show_bytes(bytes as f64),
            parts.join(" + ")
        ),
    })
}

/// "the 2.00 GiB cgroup memory limit" or "24.0 GiB of physical memory".
fn limit_phrase(bytes: u64, limits: Option<&HostLimits>) -> String {
    let physical = limits
        .and_then(|l| l.memory_limit_source.as_deref())
        .is_some_and(|s| s.contains("meminfo"));
    if physical {
        format!("{} of physical memory", show_bytes(bytes as f64))
    } else {
        format!("the {} memory limit", show_bytes(bytes as f64))
    }
}

fn verdict_sentence(held: &[&ForecastFigure]) -> String {
    if held.is_empty() {
        return "no limit known to hold the forecast to".to_string();
    }
    let misfits: Vec<&str> = held
        .iter()
        .filter(|f| !fits(f))
        .map(|f| f.basis.as_str())
        .collect();
    if misfits.is_empty() {
        let all: Vec<&str> = held.iter().map(|f| f.basis.as_str()).collect();
        format!("fits: {}", all.join("; "))
    } else {
        format!("would not fit: {}", misfits.join("; "))
    }
}

/// A `would_not_fit` or `crashed` failure in one line, for tables.
pub fn fit_failure_text(f: &Failure) -> String {
    match f {
        Failure::WouldNotFit {
            resource,
            needed_bytes,
            available_bytes,
            message,
        } => format!(
            "not run, would not fit in {}: needs {}, has {} ({message})",
            resource.label(),
            show_bytes(*needed_bytes as f64),
            show_bytes(*available_bytes as f64)
        ),
        Failure::Crashed { message, .. } => format!("crashed: {message}"),
        other => other.kind().to_string(),
    }
}

#[cfg(test)]
#[path = "forecast/tests.rs"]
mod tests;
