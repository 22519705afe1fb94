//! The image pipeline matches `pipeline::reference` within stated
//! tolerances, in 8-bit levels as mean / 99th percentile of |Δ|: full-size
//! decode 0.5 / 2; libjpeg-turbo's scaled decode 5 / 72 on textured images
//! and 1.75 / 6 on smooth ones.
//!
//! Generated JPEGs (quality 90) of several sizes and aspect ratios, and a
//! PNG, go through the public `Source` API (`ImageDirSource`) for several
//! resize/crop pairs, random or centre crop, flip or not, with
//! libjpeg-turbo and zune-jpeg, scaled decode on and off; the reference
//! runs on the same bytes with the same seed (so the same crop and flip
//! draws). Differences are in 8-bit levels, `|Δ| · 255 · std[ch]`. The
//! tests also check the shape, that every value is written, finite and in
//! range, that a flip mirrors exactly, that the comparison rejects a crop
//! moved by one or eight pixels, the wrong image and the wrong flip, and
//! that corrupt and truncated JPEGs are decode errors, not panics, and do
//! not break the next image.
//!
//! libjpeg-turbo cases are skipped, loudly, where its library does not
//! load; `STALLSCOPE_REQUIRE_TURBOJPEG=1` makes that a failure.

use std::path::{Path, PathBuf};
use std::sync::Once;

use image::codecs::jpeg::JpegEncoder;
use stallscope_loader::{
    IMAGENET_MEAN, IMAGENET_STD, ImageDirSource, ImageSpec, JpegDecoder, Rng, SampleError, Source,
    Stage, StageTimes,
    pipeline::{self, Turbo, geometry},
};

/// Mean and 99th-percentile absolute difference, in 8-bit levels.
#[derive(Debug, Clone, Copy)]
struct Tolerance {
    mean: f64,
    p99: f64,
}

/// Full-size decode: zune-jpeg (the reference's own decoder), libjpeg-turbo
/// with scaled decode off or at 1/1, and the PNG; only the resizers (and
/// with libjpeg-turbo the IDCT and chroma upsampling) differ. Measured
/// worst over the 720 cases of the first test: mean 0.218, p99 1, max 2.
const FULL: Tolerance = Tolerance {
    mean: 0.5,
    p99: 2.0,
};

/// libjpeg-turbo's DCT-domain m/8 decode (1/8 to 1/2) of the textured
/// images. Its m/8 IDCT keeps detail up to the decoded image's Nyquist
/// frequency that the reference's triangle filter (±1 output pixel)
/// halves, so edges and the 3-px checkerboard differ by tens of levels
/// where the resize after the decode has little left to do (640×480 at
/// resize 180: 3/8 gives 240×180, the target itself). Measured worst:
/// mean 3.81 (64×64 at 16/12, 1/4), p99 59 and max 75 (640×480 at 180/160,
/// 3/8).
const SCALED: Tolerance = Tolerance {
    mean: 5.0,
    p99: 72.0,
};

/// Scaled decode of the smooth images, where every filter agrees and what
/// is left is where the pixels land. Measured worst: mean 1.28, p99 4,
/// max 5 (211×333 at 16/12, 1/8). Mapping the crop through the rounded-up
/// decoded size instead of the scale (the bug fixed in `pipeline::run`)
/// measured mean 6.86 and p99 23 here.
const SCALED_SMOOTH: Tolerance = Tolerance {
    mean: 1.75,
    p99: 6.0,
};

/// The generated images: width, height, file extension, smooth (gradients
/// and slow waves only) or textured.
const IMAGES: [(u32, u32, &str, bool); 9] = [
    (500, 375, "jpg", false),
    (375, 500, "jpg", false),
    (640, 480, "jpg", false),
    (333, 211, "jpg", false),
    (64, 64, "jpg", false),
    (17, 9, "jpg", false),
    (300, 200, "png", false),
    (500, 375, "jpg", true),
    (211, 333, "jpg", true),
];
const TEXTURED_500: usize = 0;
const SMOOTH_500: usize = 7;

/// Resize (shorter side) and crop pairs: a 500×375 JPEG decodes at full
/// size for 256/224, at 1/2 for 180/160, 3/8 for 128/112, 1/4 for 64/56 and
/// 1/8 for 16/12 (smaller images fall back to full size sooner; 17×9 and
/// 64×64 are upscaled).
const SPECS: [(u32, u32); 5] = [(256, 224), (180, 160), (128, 112), (64, 56), (16, 12)];
const FULL_SIZE_SPEC: (u32, u32) = SPECS[0];
const THREE_EIGHTHS_SPEC: (u32, u32) = SPECS[2];

/// A decoder setting.
#[derive(Debug, Clone, Copy)]
struct Decode {
    decoder: JpegDecoder,
    scaled: bool,
}

const ZUNE: Decode = Decode {
    decoder: JpegDecoder::ZuneJpeg,
    scaled: false,
};
const TURBO_SCALED: Decode = Decode {
    decoder: JpegDecoder::LibjpegTurbo,
    scaled: true,
};

impl Decode {
    fn name(self) -> String {
        format!(
            "{}{}",
            self.decoder.as_str(),
            if self.scaled { "" } else { " unscaled" }
        )
    }
    fn available(self) -> bool {
        self.decoder != JpegDecoder::LibjpegTurbo || turbo().is_some()
    }
}

/// The decoder settings tested: libjpeg-turbo (where it loads) and
/// zune-jpeg (which ignores `scaled_decode`), each with scaled decode on and off.
fn decoders() -> Vec<Decode> {
    [JpegDecoder::LibjpegTurbo, JpegDecoder::ZuneJpeg]
        .into_iter()
        .flat_map(|decoder| [true, false].map(|scaled| Decode { decoder, scaled }))
        .filter(|d| d.available())
        .collect()
}

/// libjpeg-turbo, or `None` with a loud message (once); a failure instead
/// when `STALLSCOPE_REQUIRE_TURBOJPEG=1`.
fn turbo() -> Option<&'static Turbo> {
    static SKIP: Once = Once::new();
    match pipeline::turbo() {
        Ok(t) => Some(t),
        Err(why) => {
            if std::env::var("STALLSCOPE_REQUIRE_TURBOJPEG").as_deref() == Ok("1") {
                panic!("STALLSCOPE_REQUIRE_TURBOJPEG=1 but libjpeg-turbo does not load: {why}");
            }
            SKIP.call_once(|| {
                eprintln!(
                    "\n**********\nSKIPPING every libjpeg-turbo case: {why}\n\
                     (STALLSCOPE_REQUIRE_TURBOJPEG=1 makes this a failure)\n**********\n"
                )
            });
            None
        }
    }
}

/// A textured picture: smooth gradients, a sinusoidal texture, noise,
/// hard-edged rectangles and a checkerboard of 3-px squares, from `seed`.
fn draw(w: u32, h: u32, seed: u64) -> image::RgbImage {
    let mut rng = Rng::new(seed);
    let tint = [0; 3].map(|_| rng.below(80) as f32);
    let freq = 0.25 + 0.5 * rng.unit_f64() as f32;
    let mut img = image::RgbImage::from_fn(w, h, |x, y| {
        let (gx, gy) = (x as f32 / w as f32, y as f32 / h as f32);
        let texture = 18.0 * (x as f32 * freq).sin() * (y as f32 * freq * 0.7).cos();
        let mut px = [0u8; 3];
        for (c, v) in px.iter_mut().enumerate() {
            let cf = c as f32;
            let smooth = 30.0 + tint[c] + 150.0 * (gx * (cf + 1.0) + gy * (3.0 - cf)) / 3.0;
            let noise = rng.below(9) as f32 - 4.0;
            *v = (smooth + texture + noise).round().clamp(0.0, 255.0) as u8;
        }
        image::Rgb(px)
    });
    for _ in 0..5 {
        let rw = 1 + rng.below(w as u64 / 3 + 1) as u32;
        let rh = 1 + rng.below(h as u64 / 3 + 1) as u32;
        let x0 = rng.below((w - rw.min(w) + 1) as u64) as u32;
        let y0 = rng.below((h - rh.min(h) + 1) as u64) as u32;
        let color = image::Rgb([0; 3].map(|_| rng.below(256) as u8));
        for y in y0..(y0 + rh).min(h) {
            for x in x0..(x0 + rw).min(w) {
                img.put_pixel(x, y, color);
            }
        }
    }
    let (cx, cy) = (
        rng.below(w as u64 / 2 + 1) as u32,
        rng.below(h as u64 / 2 + 1) as u32,
    );
    for y in cy..(cy + h / 4).min(h) {
        for x in cx..(cx + w / 4).min(w) {
            let v = if ((x - cx) / 3 + (y - cy) / 3) % 2 == 0 {
                20
            } else {
                235
            };
            img.put_pixel(x, y, image::Rgb([v, v, v]));
        }
    }
    img
}

/// A smooth picture: gradients and waves with periods of a third of the
/// image, so every resize filter agrees on it and what differs is where
/// the pixels land.
fn draw_smooth(w: u32, h: u32, seed: u64) -> image::RgbImage {
    use std::f32::consts::TAU;
    let mut rng = Rng::new(seed);
    let phase = [0; 3].map(|_| rng.unit_f64() as f32 * TAU);
    image::RgbImage::from_fn(w, h, |x, y| {
        let (gx, gy) = (x as f32 / w as f32, y as f32 / h as f32);
        let mut px = [0u8; 3];
        for (c, v) in px.iter_mut().enumerate() {
            let cf = c as f32;
            let wave =
                (TAU * 3.0 * gx + phase[c]).sin() * (TAU * 3.0 * gy * (1.0 + cf) / 2.0).cos();
            let ramp = 100.0 * (gx * (cf + 1.0) + gy * (3.0 - cf)) / 4.0;
            *v = (40.0 + ramp + 70.0 * wave).round().clamp(0.0, 255.0) as u8;
        }
        image::Rgb(px)
    })
}

fn picture(i: usize, seed: u64) -> image::RgbImage {
    let (w, h, _, smooth) = IMAGES[i];
    if smooth {
        draw_smooth(w, h, seed)
    } else {
        draw(w, h, seed)
    }
}

fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("stallscope-pipeline-{tag}-"))
        .tempdir_in(std::env::temp_dir())
        .unwrap()
}

/// A fresh folder holding [`IMAGES`] (`00_500x375.jpg`, …: sorted names
/// keep the order, so a source's index is the position in `IMAGES`).
fn image_dir(tag: &str) -> tempfile::TempDir {
    let dir = temp_dir(tag);
    for (i, &(w, h, ext, smooth)) in IMAGES.iter().enumerate() {
        let name = format!(
            "{i:02}_{w}x{h}{}.{ext}",
            if smooth { "_smooth" } else { "" }
        );
        write_image(&dir.path().join(name), &picture(i, 100 + i as u64));
    }
    dir
}

fn write_image(path: &Path, img: &image::RgbImage) {
    if path.extension().is_some_and(|e| e == "png") {
        img.save_with_format(path, image::ImageFormat::Png).unwrap();
    } else {
        let mut writer = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
        JpegEncoder::new_with_quality(&mut writer, 90)
            .encode_image(img)
            .unwrap();
    }
}

/// The files of `dir` in source order.
fn files(dir: &Path) -> Vec<PathBuf> {
    let source = ImageDirSource::open(&spec(dir, FULL_SIZE_SPEC, false, false, ZUNE)).unwrap();
    source.files().iter().map(|(p, _)| p.clone()).collect()
}

fn spec(
    dir: &Path,
    (resize, crop): (u32, u32),
    random_crop: bool,
    flip: bool,
    d: Decode,
) -> ImageSpec {
    ImageSpec {
        random_crop,
        flip,
        decoder: d.decoder,
        scaled_decode: d.scaled,
        ..ImageSpec::new(dir.to_path_buf(), resize, crop)
    }
}

/// Sample `index` through the public `Source` API, checked for shape,
/// label, and every value written, finite and in the normalised range.
fn load(source: &ImageDirSource, spec: &ImageSpec, index: u64, seed: u64) -> Vec<f32> {
    let c = spec.crop as usize;
    assert_eq!(source.sample_dims(), vec![3, c, c]);
    let mut out = vec![f32::NAN; 3 * c * c];
    let label = source
        .load(
            index,
            &mut Rng::new(seed),
            &mut out,
            &mut StageTimes::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", source.path(index).display()));
    assert_eq!(label, 0);
    check_values(&out, c);
    out
}

fn check_values(v: &[f32], c: usize) {
    assert_eq!(v.len(), 3 * c * c);
    for (i, &x) in v.iter().enumerate() {
        let ch = i / (c * c);
        let lo = -IMAGENET_MEAN[ch] / IMAGENET_STD[ch];
        let hi = (1.0 - IMAGENET_MEAN[ch]) / IMAGENET_STD[ch];
        assert!(
            x.is_finite() && x >= lo - 1e-4 && x <= hi + 1e-4,
            "value {i} is {x}, outside [{lo}, {hi}]"
        );
    }
}

/// The difference between two CHW crops in 8-bit levels.
#[derive(Debug, Clone, Copy)]
struct Diff {
    mean: f64,
    p99: f64,
    max: f64,
}

impl Diff {
    fn within(self, tol: Tolerance) -> bool {
        self.mean <= tol.mean && self.p99 <= tol.p99
    }
}

fn diff(got: &[f32], want: &[f32]) -> Diff {
    assert_eq!(got.len(), want.len());
    let plane = got.len() / 3;
    let mut levels: Vec<f64> = got
        .iter()
        .zip(want)
        .enumerate()
        .map(|(i, (g, w))| ((g - w).abs() * 255.0 * IMAGENET_STD[i / plane]) as f64)
        .collect();
    let mean = levels.iter().sum::<f64>() / levels.len() as f64;
    let max = levels.iter().copied().fold(0.0, f64::max);
    // Nearest rank: the smallest value that 99% of the values do not exceed.
    let k = (levels.len() as f64 * 0.99).ceil() as usize - 1;
    let (_, p99, _) = levels.select_nth_unstable_by(k, f64::total_cmp);
    Diff {
        mean,
        p99: *p99,
        max,
    }
}

/// The scale the pipeline decodes an image at: n/d with libjpeg-turbo's
/// scaled decode, else 1/1.
fn decode_scale(d: Decode, bytes: &[u8], resize: u32) -> (u32, u32) {
    match turbo() {
        Some(t)
            if d.decoder == JpegDecoder::LibjpegTurbo
                && d.scaled
                && bytes.starts_with(&[0xFF, 0xD8]) =>
        {
            let img = image::load_from_memory(bytes).unwrap();
            t.scale_for(img.width(), img.height(), resize)
        }
        _ => (1, 1),
    }
}

#[test]
fn the_pipeline_matches_the_reference_within_tolerance() {
    let started = std::time::Instant::now();
    let dir = image_dir("match");
    let paths = files(dir.path());
    assert_eq!(paths.len(), IMAGES.len());
    let bytes: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let decoders = decoders();
    let mut failures = Vec::new();
    let mut cases = 0;
    // Worst (mean, p99, max) per tolerance, for the summary.
    let mut worst = [[0.0f64; 3]; 3];
    eprintln!(
        "{:<22} {:>7} {:<6} {:<4} {:<24} {:>5} {:>6} {:>6} {:>6}",
        "image", "spec", "crop", "flip", "decoder", "scale", "mean", "p99", "max"
    );
    for (si, &size) in SPECS.iter().enumerate() {
        let flags = [(false, false), (false, true), (true, false), (true, true)];
        for (fi, (random_crop, flip)) in flags.into_iter().enumerate() {
            let seed = |img: usize| (1000 * img + 10 * si + fi) as u64;
            // The reference ignores the decoder settings.
            let reference_spec = spec(dir.path(), size, random_crop, flip, ZUNE);
            let refs: Vec<Vec<f32>> = bytes
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let r =
                        pipeline::reference(&reference_spec, b, &mut Rng::new(seed(i))).unwrap();
                    check_values(&r, size.1 as usize);
                    r
                })
                .collect();
            for &d in &decoders {
                let s = spec(dir.path(), size, random_crop, flip, d);
                let source = ImageDirSource::open(&s).unwrap();
                for (i, b) in bytes.iter().enumerate() {
                    let got = load(&source, &s, i as u64, seed(i));
                    let scale = decode_scale(d, b, size.0);
                    let (kind, tol) = match (scale != (1, 1), IMAGES[i].3) {
                        (false, _) => (0, FULL),
                        (true, false) => (1, SCALED),
                        (true, true) => (2, SCALED_SMOOTH),
                    };
                    let x = diff(&got, &refs[i]);
                    let w = &mut worst[kind];
                    *w = [w[0].max(x.mean), w[1].max(x.p99), w[2].max(x.max)];
                    let line = format!(
                        "{:<22} {:>7} {:<6} {:<4} {:<24} {:>5} {:>6.3} {:>6.2} {:>6.2}",
                        paths[i].file_name().unwrap().to_string_lossy(),
                        format!("{}/{}", size.0, size.1),
                        if random_crop { "random" } else { "centre" },
                        if flip { "yes" } else { "no" },
                        d.name(),
                        format!("{}/{}", scale.0, scale.1),
                        x.mean,
                        x.p99,
                        x.max
                    );
                    eprintln!("{line}");
                    cases += 1;
                    if !x.within(tol) {
                        failures.push(format!("{line} (tolerance {tol:?})"));
                    }
                }
            }
        }
    }
    eprintln!(
        "{cases} cases in {:.1} s; worst (mean, p99, max): full decode {:?}, scaled {:?}, scaled smooth {:?}",
        started.elapsed().as_secs_f64(),
        worst[0],
        worst[1],
        worst[2]
    );
    assert!(
        failures.is_empty(),
        "{} of {cases} cases outside tolerance:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The first seed from `from` whose draw for a centre crop of a `w × h`
/// image flips (or does not).
fn seed_with_flip(s: &ImageSpec, w: u32, h: u32, flip: bool, from: u64) -> u64 {
    (from..)
        .find(|&seed| geometry(s, w, h, &mut Rng::new(seed)).unwrap().flip == flip)
        .unwrap()
}

#[test]
fn a_flip_mirrors_the_unflipped_crop_exactly() {
    let dir = image_dir("flip");
    let paths = files(dir.path());
    let (mut flipped, mut kept) = (0, 0);
    for d in decoders() {
        for size in [FULL_SIZE_SPEC, THREE_EIGHTHS_SPEC] {
            let plain = spec(dir.path(), size, false, false, d);
            let flipping = spec(dir.path(), size, false, true, d);
            let plain_source = ImageDirSource::open(&plain).unwrap();
            let flip_source = ImageDirSource::open(&flipping).unwrap();
            let c = size.1 as usize;
            for (i, &(w, h, _, _)) in IMAGES.iter().enumerate() {
                let want = load(&plain_source, &plain, i as u64, 7);
                for flip in [true, false] {
                    let seed = seed_with_flip(&flipping, w, h, flip, 40 * i as u64);
                    let got = load(&flip_source, &flipping, i as u64, seed);
                    for ch in 0..3 {
                        for y in 0..c {
                            for x in 0..c {
                                let sx = if flip { c - 1 - x } else { x };
                                let g = got[(ch * c + y) * c + x];
                                let e = want[(ch * c + y) * c + sx];
                                assert!(
                                    (g - e).abs() <= 1e-6,
                                    "{} {}, {size:?}, flip {flip}: ({ch}, {y}, {x}) is {g}, want {e}",
                                    paths[i].display(),
                                    d.name()
                                );
                            }
                        }
                    }
                    if flip {
                        flipped += 1;
                    } else {
                        kept += 1;
                    }
                }
            }
        }
    }
    assert!(flipped > 0 && kept > 0);
}

#[test]
fn the_comparison_rejects_a_moved_crop_the_wrong_image_and_the_wrong_flip() {
    let dir = image_dir("reject");
    let paths = files(dir.path());
    let other_dir = temp_dir("other");
    // (image, resize/crop, decoder, the tolerance its case has above)
    let cases = [
        (TEXTURED_500, FULL_SIZE_SPEC, ZUNE, FULL),
        (SMOOTH_500, FULL_SIZE_SPEC, ZUNE, FULL),
        (TEXTURED_500, THREE_EIGHTHS_SPEC, TURBO_SCALED, SCALED),
        (SMOOTH_500, THREE_EIGHTHS_SPEC, TURBO_SCALED, SCALED_SMOOTH),
    ];
    for (img, size, d, tol) in cases {
        if !d.available() {
            continue;
        }
        let bytes = std::fs::read(&paths[img]).unwrap();
        let s = spec(dir.path(), size, false, false, d);
        let source = ImageDirSource::open(&s).unwrap();
        let got = load(&source, &s, img as u64, 1);
        let right = pipeline::reference(&s, &bytes, &mut Rng::new(1)).unwrap();
        let x = diff(&got, &right);
        assert!(x.within(tol), "{x:?} not within {tol:?}");

        // A centre crop 16 px larger starts 8 px up and left: its window at
        // (8, 8) is the right reference, at (8 + dx, 8 + dy) one moved by
        // (dx, dy).
        let c = size.1 as usize;
        let big_spec = ImageSpec {
            crop: size.1 + 16,
            ..s.clone()
        };
        let big = pipeline::reference(&big_spec, &bytes, &mut Rng::new(1)).unwrap();
        let moved = |dx: usize, dy: usize| {
            let b = c + 16;
            let mut v = Vec::with_capacity(3 * c * c);
            for ch in 0..3 {
                for y in 0..c {
                    let row = (ch * b + dy + y) * b + dx;
                    v.extend_from_slice(&big[row..row + c]);
                }
            }
            v
        };
        assert_eq!(moved(8, 8), right, "the window construction");
        let mut mirrored = right.clone();
        for row in mirrored.chunks_exact_mut(c) {
            row.reverse();
        }
        let other_path = other_dir.path().join(format!("other_{img}.jpg"));
        write_image(&other_path, &picture(img, 9999));
        let other = std::fs::read(&other_path).unwrap();
        let other_ref = pipeline::reference(&s, &other, &mut Rng::new(1)).unwrap();
        let wrong = [
            ("moved 1 px right", moved(9, 8)),
            ("moved 1 px down", moved(8, 9)),
            ("moved 8 px right", moved(16, 8)),
            ("moved 8 px down", moved(8, 16)),
            ("mirrored", mirrored),
            ("of another image", other_ref),
        ];
        let name = paths[img].file_name().unwrap().to_string_lossy();
        eprintln!(
            "{name} {size:?} {}, the right reference: mean {:.3}, p99 {:.2}, max {:.2}",
            d.name(),
            x.mean,
            x.p99,
            x.max
        );
        for (what, reference) in wrong {
            let x = diff(&got, &reference);
            eprintln!(
                "{name} {size:?} {}, a reference {what}: mean {:.3}, p99 {:.2}, max {:.2} (tolerance {tol:?})",
                d.name(),
                x.mean,
                x.p99,
                x.max
            );
            assert!(
                !x.within(tol),
                "{name} {size:?} {}: a reference {what} passes: {x:?} within {tol:?}",
                d.name()
            );
        }
    }
}

/// Broken files zune-jpeg decodes without an error: `image` 0.25 runs it in
/// non-strict mode, which fills corrupt or missing entropy-coded data in.
const ZUNE_ACCEPTS: [&str; 2] = ["b_headers_then_garbage.jpg", "c_truncated_half.jpg"];

#[test]
fn corrupt_and_truncated_jpegs_are_decode_errors() {
    let dir = temp_dir("corrupt");
    // Sorted last: the image decoded after each broken one.
    let good_path = dir.path().join("z_good.jpg");
    write_image(&good_path, &draw(500, 375, 3));
    let good = std::fs::read(&good_path).unwrap();
    // The headers up to and including the start-of-scan segment.
    let sos = good
        .windows(2)
        .position(|w| w == [0xFF, 0xDA])
        .expect("a start of scan");
    let sos_len = u16::from_be_bytes([good[sos + 2], good[sos + 3]]) as usize;
    let headers = &good[..sos + 2 + sos_len];
    let mut rng = Rng::new(17);
    let garbage: Vec<u8> = (0..good.len() - headers.len())
        .map(|_| rng.below(256) as u8)
        .collect();
    let cases: [(&str, Vec<u8>); 4] = [
        (
            "a_soi_then_text.jpg",
            b"\xFF\xD8\xFF this is not a JPEG".to_vec(),
        ),
        ("b_headers_then_garbage.jpg", [headers, &garbage].concat()),
        ("c_truncated_half.jpg", good[..good.len() / 2].to_vec()),
        ("d_truncated_in_headers.jpg", good[..sos / 2].to_vec()),
    ];
    for (name, b) in &cases {
        std::fs::write(dir.path().join(name), b).unwrap();
    }
    let c = THREE_EIGHTHS_SPEC.1 as usize;
    let load = |source: &ImageDirSource, index: usize| {
        let mut out = vec![f32::NAN; 3 * c * c];
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            source.load(
                index as u64,
                &mut Rng::new(1),
                &mut out,
                &mut StageTimes::default(),
            )
        }));
        (result, out)
    };
    let mut wrong = Vec::new();
    for d in decoders() {
        let s = spec(dir.path(), THREE_EIGHTHS_SPEC, true, true, d);
        let source = ImageDirSource::open(&s).unwrap();
        assert_eq!(source.len(), cases.len() + 1);
        for (i, (name, _)) in cases.iter().enumerate() {
            let lenient = d.decoder == JpegDecoder::ZuneJpeg && ZUNE_ACCEPTS.contains(name);
            match load(&source, i) {
                (Err(_), _) => wrong.push(format!("{} panics on {name}", d.name())),
                (Ok(Ok(_)), out) if lenient => {
                    eprintln!(
                        "NOTE: {} decodes the broken {name} without an error (non-strict zune-jpeg)",
                        d.name()
                    );
                    check_values(&out, c);
                }
                (Ok(Ok(_)), _) => {
                    wrong.push(format!("{} decodes {name} without an error", d.name()))
                }
                (Ok(Err(SampleError { stage, message, .. })), _) => {
                    eprintln!("{} on {name}: {message}", d.name());
                    if stage != Stage::Decode || !message.contains("cannot decode") {
                        wrong.push(format!(
                            "{} on {name}: stage {stage:?}: {message}",
                            d.name()
                        ));
                    }
                }
            }
            // The same thread, so the same libjpeg-turbo handle, goes on.
            match load(&source, cases.len()) {
                (Ok(Ok(_)), out) => check_values(&out, c),
                (Ok(Err(e)), _) => wrong.push(format!(
                    "{} after {name}: the good image fails: {}",
                    d.name(),
                    e.message
                )),
                (Err(_), _) => {
                    wrong.push(format!("{} after {name}: the good image panics", d.name()))
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
