//! What an image source is asked to do, as data: the directory and its
//! transform ([`ImageSpec`]), the JPEG decoder it names ([`JpegDecoder`])
//! and the normalisation constants. A leaf: the source (`images`) and the
//! per-image work (`pipeline`) both read it, neither through the other.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// ImageNet channel means and standard deviations (the usual normalisation).
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// An image directory and its transform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageSpec {
    pub dir: PathBuf,
    /// The shorter side is resized to this many pixels.
    pub resize: u32,
    /// Then a random `crop × crop` window is cut (centre crop if not `random_crop`).
    pub crop: u32,
    #[serde(default = "yes")]
    pub random_crop: bool,
    /// Mirror horizontally with probability ½.
    #[serde(default = "yes")]
    pub flip: bool,
    /// The JPEG decoder (libjpeg-turbo when present, by default).
    #[serde(default)]
    pub decoder: JpegDecoder,
    /// With libjpeg-turbo, decode at the smallest m/8 scale whose shorter
    /// side is still at least `resize` (the pixels differ slightly from a
    /// full decode followed by the same resize).
    #[serde(default = "yes")]
    pub scaled_decode: bool,
}

impl ImageSpec {
    /// A spec with the default pipeline: random crop and flip, libjpeg-turbo
    /// where present, scaled decode.
    pub fn new(dir: PathBuf, resize: u32, crop: u32) -> Self {
        ImageSpec {
            dir,
            resize,
            crop,
            random_crop: true,
            flip: true,
            decoder: JpegDecoder::Auto,
            scaled_decode: true,
        }
    }
}

fn yes() -> bool {
    true
}

/// Which JPEG decoder the native loader uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JpegDecoder {
    /// libjpeg-turbo when its library loads, zune-jpeg otherwise.
    #[default]
    Auto,
    /// libjpeg-turbo's TurboJPEG API (`libturbojpeg.so.0`), loaded at run time.
    LibjpegTurbo,
    /// zune-jpeg (pure Rust, inside the `image` crate); never scaled.
    ZuneJpeg,
}

impl JpegDecoder {
    pub const ALL: [JpegDecoder; 3] = [
        JpegDecoder::Auto,
        JpegDecoder::LibjpegTurbo,
        JpegDecoder::ZuneJpeg,
    ];

    /// The decoder a suite or the command line names.
    pub fn from_name(name: &str) -> Option<JpegDecoder> {
        Self::ALL.into_iter().find(|d| d.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JpegDecoder::Auto => "auto",
            JpegDecoder::LibjpegTurbo => "libjpeg-turbo",
            JpegDecoder::ZuneJpeg => "zune-jpeg",
        }
    }
}
