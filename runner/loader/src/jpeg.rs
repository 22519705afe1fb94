//! libjpeg-turbo's TurboJPEG API, loaded at run time (`libturbojpeg.so.0`,
//! Debian's `libturbojpeg0`): JPEG decode with DCT-domain scaling (m/8), so
//! an image bound for a smaller size is never decoded at full size. Nothing
//! links against it; without the library the loader decodes with zune-jpeg.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int, c_ulong, c_void};
use std::sync::OnceLock;

/// The library names tried, in order.
const NAMES: [&str; 2] = ["libturbojpeg.so.0", "libturbojpeg.so"];
/// `TJPF_RGB`: interleaved 8-bit R, G, B.
const TJPF_RGB: c_int = 0;
/// `TJFLAG_STOPONWARNING`: a corrupt image is an error, not a warning.
const TJFLAG_STOPONWARNING: c_int = 8192;

#[repr(C)]
#[derive(Clone, Copy)]
struct ScalingFactor {
    num: c_int,
    denom: c_int,
}

type InitFn = unsafe extern "C" fn() -> *mut c_void;
type DestroyFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type HeaderFn = unsafe extern "C" fn(
    *mut c_void,
    *const u8,
    c_ulong,
    *mut c_int,
    *mut c_int,
    *mut c_int,
    *mut c_int,
) -> c_int;
type DecompressFn = unsafe extern "C" fn(
    *mut c_void,
    *const u8,
    c_ulong,
    *mut u8,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
) -> c_int;
type ErrorFn = unsafe extern "C" fn(*mut c_void) -> *mut c_char;
type FactorsFn = unsafe extern "C" fn(*mut c_int) -> *mut ScalingFactor;

/// The loaded library and the entry points the loader uses.
pub struct Turbo {
    _lib: libloading::Library,
    init: InitFn,
    destroy: DestroyFn,
    header: HeaderFn,
    decompress: DecompressFn,
    error: ErrorFn,
    /// The scaling factors this build supports, as (num, denom), ≤ 1 only.
    factors: Vec<(u32, u32)>,
    /// The file that was loaded.
    pub name: &'static str,
}

// SAFETY: the library's entry points are plain C functions and the handles
// they make are kept per thread (see `HANDLE`), never shared.
unsafe impl Sync for Turbo {}
unsafe impl Send for Turbo {}

static TURBO: OnceLock<Result<Turbo, String>> = OnceLock::new();

/// The library, loaded once per process; the error says why it is not there.
pub fn turbo() -> Result<&'static Turbo, &'static str> {
    TURBO.get_or_init(load).as_ref().map_err(|e| e.as_str())
}

fn load() -> Result<Turbo, String> {
    let mut why = Vec::new();
    for name in NAMES {
        // SAFETY: loading libturbojpeg runs no initialisers with preconditions.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => return bind(lib, name),
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(format!(
        "libjpeg-turbo's TurboJPEG library is not installed ({}); Debian: apt-get install libturbojpeg0",
        why.first().map_or("not found", String::as_str)
    ))
}

fn bind(lib: libloading::Library, name: &'static str) -> Result<Turbo, String> {
    macro_rules! sym {
        ($t:ty, $s:literal) => {
            // SAFETY: the symbol has this C signature in TurboJPEG 2.x and 3.x.
            *unsafe { lib.get::<$t>($s) }.map_err(|e| format!("{name}: {e}"))?
        };
    }
    let init = sym!(InitFn, b"tjInitDecompress\0");
    let destroy = sym!(DestroyFn, b"tjDestroy\0");
    let header = sym!(HeaderFn, b"tjDecompressHeader3\0");
    let decompress = sym!(DecompressFn, b"tjDecompress2\0");
    let error = sym!(ErrorFn, b"tjGetErrorStr2\0");
    let get_factors = sym!(FactorsFn, b"tjGetScalingFactors\0");
    let mut n: c_int = 0;
    // SAFETY: returns a static array of `n` factors (or null).
    let list = unsafe { get_factors(&mut n) };
    let mut factors = Vec::new();
    if !list.is_null() {
        for i in 0..n.max(0) as usize {
            // SAFETY: `i < n`, inside the library's static array.
            let f = unsafe { *list.add(i) };
            if f.num > 0 && f.denom > 0 && f.num <= f.denom {
                factors.push((f.num as u32, f.denom as u32));
            }
        }
    }
    if factors.is_empty() {
        factors.push((1, 1));
    }
    // Smallest first: the first that is large enough wins.
    factors.sort_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)));
    Ok(Turbo {
        _lib: lib,
        init,
        destroy,
        header,
        decompress,
        error,
        factors,
        name,
    })
}

/// `TJSCALED`: a dimension after scaling by `num/denom`.
pub fn scaled(dim: u32, (num, denom): (u32, u32)) -> u32 {
    ((dim as u64 * num as u64).div_ceil(denom as u64)) as u32
}

struct Handle(*mut c_void);

impl Drop for Handle {
    fn drop(&mut self) {
        if let Ok(t) = turbo()
            && !self.0.is_null()
        {
            // SAFETY: the handle came from `tjInitDecompress` on this thread.
            unsafe { (t.destroy)(self.0) };
        }
    }
}

thread_local! {
    static HANDLE: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

/// A decoded image: RGB, `width × height`, and the scale it was decoded at.
pub struct Decoded {
    pub width: u32,
    pub height: u32,
    /// The JPEG's own size.
    pub full: (u32, u32),
    pub scale: (u32, u32),
}

impl Turbo {
    /// The smallest supported scale of at most 1/2 at which the image's
    /// shorter side is still at least `min_short` pixels, else 1/1.
    ///
    /// Scales between 1/2 and 1 are not used: libjpeg-turbo's SIMD inverse
    /// DCT is the 8×8 one, and its scalar 5×5–7×7 ones made a 3/4 decode
    /// of a 500×375 JPEG slower than the full one (`stallscope bare-images`
    /// on 2 cores: 470 against 540 images/s), while 1/2 and 3/8 were faster
    /// (727 and 727 against 624 and 617 images/s).
    pub fn scale_for(&self, w: u32, h: u32, min_short: u32) -> (u32, u32) {
        self.factors
            .iter()
            .copied()
            .filter(|&(n, d)| 2 * n <= d)
            .find(|&f| scaled(w, f).min(scaled(h, f)) >= min_short)
            .unwrap_or((1, 1))
    }

    fn message(&self, handle: *mut c_void) -> String {
        // SAFETY: returns a NUL-terminated string owned by the library.
        let p = unsafe { (self.error)(handle) };
        if p.is_null() {
            return "unknown TurboJPEG error".into();
        }
        // SAFETY: non-null, NUL-terminated.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Decode `jpeg` into `out` (resized as needed), scaled down as far as
    /// `min_short` allows when `scale` is on.
    pub fn decode(
        &self,
        jpeg: &[u8],
        min_short: u32,
        scale: bool,
        out: &mut Vec<u8>,
    ) -> Result<Decoded, String> {
        let result = self.decode_with_handle(jpeg, min_short, scale, out);
        if result.is_err() {
            // After an error a TurboJPEG 2.1 handle keeps failing on good
            // images ("Unsupported marker type"): start a fresh one.
            HANDLE.with_borrow_mut(|slot| *slot = None);
        }
        result
    }

    fn decode_with_handle(
        &self,
        jpeg: &[u8],
        min_short: u32,
        scale: bool,
        out: &mut Vec<u8>,
    ) -> Result<Decoded, String> {
        HANDLE.with_borrow_mut(|slot| {
            if slot.is_none() {
                // SAFETY: no preconditions; null means failure.
                let h = unsafe { (self.init)() };
                if h.is_null() {
                    return Err(format!("tjInitDecompress failed: {}", self.message(h)));
                }
                *slot = Some(Handle(h));
            }
            let h = slot.as_ref().expect("handle").0;
            let (mut w, mut ht, mut sub, mut cs) = (0, 0, 0, 0);
            let len = jpeg.len() as c_ulong;
            // SAFETY: `jpeg` is valid for `len` bytes; the outputs are locals.
            let rc =
                unsafe { (self.header)(h, jpeg.as_ptr(), len, &mut w, &mut ht, &mut sub, &mut cs) };
            if rc != 0 || w <= 0 || ht <= 0 {
                return Err(self.message(h));
            }
            let full = (w as u32, ht as u32);
            let factor = if scale {
                self.scale_for(full.0, full.1, min_short)
            } else {
                (1, 1)
            };
            let (sw, sh) = (scaled(full.0, factor), scaled(full.1, factor));
            out.resize(sw as usize * sh as usize * 3, 0);
            // SAFETY: `out` holds sw × sh × 3 bytes, the pitch is sw × 3.
            let rc = unsafe {
                (self.decompress)(
                    h,
                    jpeg.as_ptr(),
                    len,
                    out.as_mut_ptr(),
                    sw as c_int,
                    (sw * 3) as c_int,
                    sh as c_int,
                    TJPF_RGB,
                    TJFLAG_STOPONWARNING,
                )
            };
            if rc != 0 {
                return Err(self.message(h));
            }
            Ok(Decoded {
                width: sw,
                height: sh,
                full,
                scale: factor,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_rounds_up_as_tjscaled_does() {
        assert_eq!(scaled(375, (3, 4)), 282);
        assert_eq!(scaled(500, (3, 4)), 375);
        assert_eq!(scaled(7, (1, 8)), 1);
        assert_eq!(scaled(256, (1, 1)), 256);
    }
}
