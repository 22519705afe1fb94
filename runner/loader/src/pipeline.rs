//! The image pipeline's work on one image: decode (libjpeg-turbo with
//! DCT-domain scaling where the resize allows it, else zune-jpeg), resize
//! only the region the crop keeps, then one pass from interleaved u8 RGB to
//! normalised planar f32 written straight into the batch. Also the
//! reference pipeline (full decode, whole-image resize with the `image`
//! crate, crop, per-pixel arithmetic) the tests compare it with.
//!
//! A public namespace of the loader (its stages are what `tests/pipeline.rs`
//! holds to the reference), with the libjpeg-turbo handle it decodes with.

use std::cell::RefCell;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

pub use super::image_spec::JpegDecoder;
use super::image_spec::{IMAGENET_MEAN, IMAGENET_STD, ImageSpec};
use super::jpeg;
pub use super::jpeg::{Turbo, turbo};
use super::rng::Rng;

/// The decoder a spec gets on this machine, or why the one asked for is
/// not there. `Ok(None)` means zune-jpeg.
pub fn resolve(decoder: JpegDecoder) -> Result<Option<&'static jpeg::Turbo>, String> {
    match decoder {
        JpegDecoder::ZuneJpeg => Ok(None),
        JpegDecoder::Auto => Ok(jpeg::turbo().ok()),
        JpegDecoder::LibjpegTurbo => jpeg::turbo().map(Some).map_err(str::to_string),
    }
}

/// What the pipeline does to an image set, in words for the bundle: the
/// decoder, and the scale the first image decodes at.
pub fn describe(spec: &ImageSpec, first: Option<&[u8]>) -> Result<String, String> {
    let turbo = resolve(spec.decoder)?;
    let mut s = match (turbo, spec.decoder) {
        (Some(t), _) => format!("decoder libjpeg-turbo ({})", t.name),
        (None, JpegDecoder::Auto) => format!(
            "decoder zune-jpeg ({})",
            jpeg::turbo().err().unwrap_or("libjpeg-turbo not chosen")
        ),
        (None, _) => "decoder zune-jpeg (asked for)".to_string(),
    };
    match (turbo, spec.scaled_decode) {
        (Some(t), true) => {
            s += ", scaled DCT decode (m/8, at most 1/2) where the resize allows";
            if let Some(bytes) = first
                && let Some((w, h)) = image_size(bytes)
            {
                let (n, d) = t.scale_for(w, h, spec.resize);
                s += &format!(
                    " (the first image: {w}×{h} decoded at {n}/{d}, {}×{})",
                    jpeg::scaled(w, (n, d)),
                    jpeg::scaled(h, (n, d))
                );
            }
        }
        (Some(_), false) => s += ", full-size decode (scaled_decode = false)",
        (None, _) => s += ", full-size decode",
    }
    s += "; only the cropped region is resized";
    Ok(s)
}

/// Width and height from the file's header (no decode), for the summary.
fn image_size(bytes: &[u8]) -> Option<(u32, u32)> {
    image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .ok()?
        .into_dimensions()
        .ok()
}

/// Where the crop sits in the resized image, and whether it is mirrored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// The resized image (shorter side = `resize`).
    pub nw: u32,
    pub nh: u32,
    pub x0: u32,
    pub y0: u32,
    pub flip: bool,
}

/// The resize and crop of a `w × h` image; draws the crop position, then
/// the flip, from `rng` (the same draws whatever the decoder).
pub fn geometry(spec: &ImageSpec, w: u32, h: u32, rng: &mut Rng) -> Result<Geometry, String> {
    if w == 0 || h == 0 {
        return Err("the image has no pixels".into());
    }
    let short = w.min(h) as f64;
    let scale = spec.resize as f64 / short;
    let nw = ((w as f64 * scale).round() as u32).max(spec.resize);
    let nh = ((h as f64 * scale).round() as u32).max(spec.resize);
    let c = spec.crop;
    let (x0, y0) = if spec.random_crop {
        (
            rng.below((nw - c + 1) as u64) as u32,
            rng.below((nh - c + 1) as u64) as u32,
        )
    } else {
        ((nw - c) / 2, (nh - c) / 2)
    };
    let flip = spec.flip && rng.coin();
    Ok(Geometry {
        nw,
        nh,
        x0,
        y0,
        flip,
    })
}

/// Per-image buffers, kept per worker thread so no image allocates.
struct Scratch {
    rgb: Vec<u8>,
    region: Vec<u8>,
    resizer: Resizer,
}

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// The stage an error belongs to.
pub enum Failed {
    Decode(String),
    Transform(String),
}

/// Decode `bytes`, then (after `decoded` is called, which ends the decode
/// stage) resize the crop's region and normalise into `out`.
pub fn run(
    spec: &ImageSpec,
    turbo: Option<&jpeg::Turbo>,
    bytes: &[u8],
    rng: &mut Rng,
    out: &mut [f32],
    decoded: &mut dyn FnMut(),
) -> Result<(), Failed> {
    SCRATCH.with_borrow_mut(|slot| {
        let s = slot.get_or_insert_with(|| Scratch {
            rgb: Vec::new(),
            region: Vec::new(),
            resizer: Resizer::new(),
        });
        let is_jpeg = bytes.starts_with(&[0xFF, 0xD8]);
        let (full, dims, scale) = match turbo {
            Some(t) if is_jpeg => {
                let d = t
                    .decode(bytes, spec.resize, spec.scaled_decode, &mut s.rgb)
                    .map_err(|e| Failed::Decode(format!("cannot decode: {e}")))?;
                (d.full, (d.width, d.height), d.scale)
            }
            _ => {
                let img = image::load_from_memory(bytes)
                    .map_err(|e| Failed::Decode(format!("cannot decode: {e}")))?
                    .into_rgb8();
                let dims = img.dimensions();
                s.rgb = img.into_raw();
                (dims, dims, (1, 1))
            }
        };
        decoded();
        let g = geometry(spec, full.0, full.1, rng).map_err(Failed::Transform)?;
        let c = spec.crop;
        // Decoded pixel i covers full-size pixels [i·d/n, (i+1)·d/n): map the
        // crop through the scale n/d, not through the decoded size, which
        // TJSCALED rounds up (500 at 3/8 is 188, not 187.5) and which would
        // stretch the crop by up to a decoded pixel towards the far edge.
        let f = scale.0 as f64 / scale.1 as f64;
        let (sx, sy) = (
            full.0 as f64 * f / g.nw as f64,
            full.1 as f64 * f / g.nh as f64,
        );
        let (left, top) = (g.x0 as f64 * sx, g.y0 as f64 * sy);
        // Never past the decoded edge by a rounding error (the resizer refuses that).
        let width = (c as f64 * sx).min(dims.0 as f64 - left);
        let height = (c as f64 * sy).min(dims.1 as f64 - top);
        let src = ImageRef::new(dims.0, dims.1, &s.rgb, PixelType::U8x3)
            .map_err(|e| Failed::Transform(e.to_string()))?;
        s.region.resize((c * c * 3) as usize, 0);
        let mut dst = Image::from_slice_u8(c, c, &mut s.region, PixelType::U8x3)
            .map_err(|e| Failed::Transform(e.to_string()))?;
        let options = ResizeOptions::new()
            .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
            .crop(left, top, width, height);
        s.resizer
            .resize(&src, &mut dst, &options)
            .map_err(|e| Failed::Transform(e.to_string()))?;
        normalise(&s.region, c as usize, g.flip, out);
        Ok(())
    })
}

/// Per channel, `x / 255` then ImageNet's mean and std, as one multiply-add.
fn affine() -> ([f32; 3], [f32; 3]) {
    let mut k = [0.0; 3];
    let mut b = [0.0; 3];
    for ch in 0..3 {
        k[ch] = 1.0 / (255.0 * IMAGENET_STD[ch]);
        b[ch] = -IMAGENET_MEAN[ch] / IMAGENET_STD[ch];
    }
    (k, b)
}

/// `c × c` interleaved RGB → three normalised planes in `out` (CHW), mirrored
/// when `flip`; one pass the compiler vectorises.
pub fn normalise(rgb: &[u8], c: usize, flip: bool, out: &mut [f32]) {
    let (k, b) = affine();
    let plane = c * c;
    let (r, rest) = out[..3 * plane].split_at_mut(plane);
    let (g, bl) = rest.split_at_mut(plane);
    for y in 0..c {
        let row = &rgb[y * c * 3..(y + 1) * c * 3];
        let span = y * c..(y + 1) * c;
        let (ro, go, bo) = (&mut r[span.clone()], &mut g[span.clone()], &mut bl[span]);
        if flip {
            for (x, px) in row.chunks_exact(3).rev().enumerate() {
                ro[x] = px[0] as f32 * k[0] + b[0];
                go[x] = px[1] as f32 * k[1] + b[1];
                bo[x] = px[2] as f32 * k[2] + b[2];
            }
        } else {
            for (x, px) in row.chunks_exact(3).enumerate() {
                ro[x] = px[0] as f32 * k[0] + b[0];
                go[x] = px[1] as f32 * k[1] + b[1];
                bo[x] = px[2] as f32 * k[2] + b[2];
            }
        }
    }
}

/// The reference: decode at full size with the `image` crate (zune-jpeg),
/// resize the whole image with `image`'s own triangle (bilinear) filter,
/// cut the crop, and normalise pixel by pixel as the textbook writes it.
/// Slow on purpose; it shares no code with [`run`] but [`geometry`].
pub fn reference(spec: &ImageSpec, bytes: &[u8], rng: &mut Rng) -> Result<Vec<f32>, String> {
    let img = image::load_from_memory(bytes)
        .map_err(|e| e.to_string())?
        .into_rgb8();
    let (w, h) = img.dimensions();
    let g = geometry(spec, w, h, rng)?;
    let resized = image::imageops::resize(&img, g.nw, g.nh, image::imageops::FilterType::Triangle);
    let c = spec.crop;
    let plane = (c * c) as usize;
    let mut out = vec![0.0f32; 3 * plane];
    for y in 0..c {
        for x in 0..c {
            let sx = if g.flip { g.x0 + c - 1 - x } else { g.x0 + x };
            let p = resized.get_pixel(sx, g.y0 + y);
            for ch in 0..3 {
                out[ch * plane + (y * c + x) as usize] =
                    (p[ch] as f32 / 255.0 - IMAGENET_MEAN[ch]) / IMAGENET_STD[ch];
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_matches_the_textbook_formula_and_mirrors() {
        let c = 3;
        let rgb: Vec<u8> = (0..(c * c * 3) as u32)
            .map(|v| (v * 9 % 256) as u8)
            .collect();
        for flip in [false, true] {
            let mut out = vec![0.0; 3 * c * c];
            normalise(&rgb, c, flip, &mut out);
            for y in 0..c {
                for x in 0..c {
                    let sx = if flip { c - 1 - x } else { x };
                    for ch in 0..3 {
                        let want = (rgb[(y * c + sx) * 3 + ch] as f32 / 255.0 - IMAGENET_MEAN[ch])
                            / IMAGENET_STD[ch];
                        let got = out[ch * c * c + y * c + x];
                        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
                    }
                }
            }
        }
    }

    #[test]
    fn image_size_reads_the_header() {
        let mut buf = Vec::new();
        let img = image::RgbImage::from_pixel(37, 21, image::Rgb([10, 20, 30]));
        img.write_to(
            &mut std::io::Cursor::new(&mut buf),
            image::ImageFormat::Jpeg,
        )
        .unwrap();
        assert_eq!(image_size(&buf), Some((37, 21)));
        assert_eq!(image_size(b"not a jpeg"), None);
    }
}
