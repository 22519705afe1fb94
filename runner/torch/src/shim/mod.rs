//! Typed Rust side of the C++ shim (`shim.cpp`): what `tch` does not expose —
//! caching-allocator counters, memory info, allocator settings (the memory
//! fraction), a side CUDA stream with a guard, and the TF32 flags.
//!
//! The shim uses libtorch's device-generic API only, so it links on a
//! CPU-only machine; the CUDA functions work once `libtorch_cuda.so` is loaded
//! (see `crate::device`) and otherwise return an error.

pub mod store;

use std::ffi::{CStr, CString, c_char, c_int, c_void};

unsafe extern "C" {
    fn ss_last_error() -> *const c_char;
    fn ss_torch_version() -> *const c_char;
    fn ss_set_tf32(matmul: c_int, cudnn: c_int) -> c_int;
    fn ss_get_tf32(matmul: *mut c_int, cudnn: *mut c_int) -> c_int;
    fn ss_cuda_memory_stats(device: c_int, out4: *mut u64) -> c_int;
    fn ss_cuda_reset_peak(device: c_int) -> c_int;
    fn ss_cuda_empty_cache() -> c_int;
    fn ss_cuda_mem_info(device: c_int, free: *mut u64, total: *mut u64) -> c_int;
    fn ss_set_allocator_settings(settings: *const c_char) -> c_int;
    fn ss_cuda_side_stream(device: c_int) -> *mut c_void;
    fn ss_stream_free(stream: *mut c_void);
    fn ss_stream_guard_enter(stream: *mut c_void) -> *mut c_void;
    fn ss_stream_guard_exit(guard: *mut c_void);
    fn ss_stream_synchronize(stream: *mut c_void) -> c_int;
    fn ss_current_stream_wait(stream: *mut c_void) -> c_int;
    fn ss_record_on_current_stream(tensor: *mut c_void) -> c_int;
    fn ss_tensor_from_owned(
        data: *mut c_void,
        sizes: *const i64,
        ndim: c_int,
        dtype: c_int,
        release: unsafe extern "C" fn(*mut c_void),
        ctx: *mut c_void,
        out: *mut *mut c_void,
    ) -> c_int;
}

/// A libtorch call inside the shim raised an exception.
#[derive(Debug, Clone, thiserror::Error)]
#[error("libtorch ({call}): {message}")]
pub struct ShimError {
    pub call: &'static str,
    pub message: String,
}

fn check(call: &'static str, rc: c_int) -> Result<(), ShimError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(last_error(call))
    }
}

fn last_error(call: &'static str) -> ShimError {
    // SAFETY: the shim returns a pointer to a thread-local NUL-terminated string.
    let message = unsafe { CStr::from_ptr(ss_last_error()) }
        .to_string_lossy()
        .into_owned();
    ShimError { call, message }
}

/// The libtorch version of the headers the runner was built against.
pub fn torch_version() -> String {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(ss_torch_version()) }
        .to_string_lossy()
        .into_owned()
}

/// TF32 flags of libtorch's global context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tf32 {
    pub matmul: bool,
    pub cudnn: bool,
}

/// Set TF32 for matmul (cuBLAS) and cuDNN convolutions.
pub fn set_tf32(flags: Tf32) -> Result<(), ShimError> {
    // SAFETY: plain value arguments.
    check("set_tf32", unsafe {
        ss_set_tf32(flags.matmul.into(), flags.cudnn.into())
    })
}

/// Read the TF32 flags back.
pub fn tf32() -> Result<Tf32, ShimError> {
    let (mut m, mut c) = (0, 0);
    // SAFETY: two valid out-pointers.
    check("tf32", unsafe { ss_get_tf32(&mut m, &mut c) })?;
    Ok(Tf32 {
        matmul: m != 0,
        cudnn: c != 0,
    })
}

/// Caching-allocator counters of one CUDA device, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    pub allocated: u64,
    pub peak_allocated: u64,
    pub reserved: u64,
    pub peak_reserved: u64,
}

pub fn cuda_memory_stats(device: u32) -> Result<AllocatorStats, ShimError> {
    let mut out = [0u64; 4];
    // SAFETY: `out` holds the four values the shim writes.
    check("memory_stats", unsafe {
        ss_cuda_memory_stats(device as c_int, out.as_mut_ptr())
    })?;
    Ok(AllocatorStats {
        allocated: out[0],
        peak_allocated: out[1],
        reserved: out[2],
        peak_reserved: out[3],
    })
}

pub fn cuda_reset_peak(device: u32) -> Result<(), ShimError> {
    // SAFETY: plain value argument.
    check("reset_peak_stats", unsafe {
        ss_cuda_reset_peak(device as c_int)
    })
}

pub fn cuda_empty_cache() -> Result<(), ShimError> {
    // SAFETY: no arguments.
    check("empty_cache", unsafe { ss_cuda_empty_cache() })
}

/// `cudaMemGetInfo`: (free, total) bytes of the device.
pub fn cuda_mem_info(device: u32) -> Result<(u64, u64), ShimError> {
    let (mut free, mut total) = (0u64, 0u64);
    // SAFETY: two valid out-pointers.
    check("mem_get_info", unsafe {
        ss_cuda_mem_info(device as c_int, &mut free, &mut total)
    })?;
    Ok((free, total))
}

/// Allocator settings in `PYTORCH_CUDA_ALLOC_CONF` syntax.
pub fn set_allocator_settings(settings: &str) -> Result<(), ShimError> {
    let c = CString::new(settings).map_err(|_| ShimError {
        call: "set_allocator_settings",
        message: "settings contain a NUL byte".into(),
    })?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    check("set_allocator_settings", unsafe {
        ss_set_allocator_settings(c.as_ptr())
    })
}

/// A CUDA stream from libtorch's pool, apart from the default stream.
pub struct SideStream {
    ptr: *mut c_void,
}

impl SideStream {
    pub fn new(device: u32) -> Result<SideStream, ShimError> {
        // SAFETY: plain value argument; null means an exception was caught.
        let ptr = unsafe { ss_cuda_side_stream(device as c_int) };
        if ptr.is_null() {
            return Err(last_error("side_stream"));
        }
        Ok(SideStream { ptr })
    }

    /// Make this stream current until the guard is dropped.
    pub fn enter(&self) -> Result<StreamGuard<'_>, ShimError> {
        // SAFETY: `self.ptr` is a live stream owned by `self`.
        let ptr = unsafe { ss_stream_guard_enter(self.ptr) };
        if ptr.is_null() {
            return Err(last_error("stream_guard"));
        }
        Ok(StreamGuard { ptr, _stream: self })
    }

    /// Block the host until the stream's work is done.
    pub fn synchronize(&self) -> Result<(), ShimError> {
        // SAFETY: live stream.
        check("stream_synchronize", unsafe {
            ss_stream_synchronize(self.ptr)
        })
    }

    /// Make the current stream wait (on the device) for this stream's work.
    pub fn make_current_wait(&self) -> Result<(), ShimError> {
        // SAFETY: live stream.
        check("stream_wait", unsafe { ss_current_stream_wait(self.ptr) })
    }
}

/// Mark a device tensor as used by the current stream (it was made on a side
/// stream): the caching allocator keeps its memory until that stream is done
/// (PyTorch's `tensor.record_stream(torch.cuda.current_stream())`).
pub fn record_on_current_stream(t: &tch::Tensor) -> Result<(), ShimError> {
    // SAFETY: `as_ptr` is tch's `at::Tensor*`, alive for the call.
    check("record_stream", unsafe {
        ss_record_on_current_stream(t.as_ptr() as *mut c_void)
    })
}

/// Element types a host buffer can hand to libtorch without a copy.
pub trait OwnedElement: Copy + Send + 'static {
    /// The shim's dtype code.
    const DTYPE: c_int;
}
impl OwnedElement for f32 {
    const DTYPE: c_int = 0;
}
impl OwnedElement for i64 {
    const DTYPE: c_int = 1;
}
impl OwnedElement for u8 {
    const DTYPE: c_int = 2;
}

/// Memory a tensor made by [`tensor_from_owned`] keeps alive; dropped (on
/// whatever thread frees the tensor's storage) when the tensor is gone.
pub type Owner<T> = Box<dyn OwnedBuffer<T>>;

/// A buffer whose elements a tensor may borrow for as long as it lives.
pub trait OwnedBuffer<T>: Send {
    fn elements(&mut self) -> &mut [T];
}

impl<T: Send> OwnedBuffer<T> for Vec<T> {
    fn elements(&mut self) -> &mut [T] {
        self
    }
}

/// The native loader's batch buffers go back to its pool with the tensor.
impl OwnedBuffer<f32> for stallscope_loader::Pooled {
    fn elements(&mut self) -> &mut [f32] {
        &mut self.values
    }
}

unsafe extern "C" fn release_owner<T: OwnedElement>(ctx: *mut c_void) {
    // SAFETY: `ctx` is the `Box<Owner<T>>` leaked by `tensor_from_owned`,
    // released exactly once (by libtorch's deleter, or on failure).
    drop(unsafe { Box::from_raw(ctx as *mut Owner<T>) });
}

/// A CPU tensor of `shape` over `owner`'s elements, with no copy: libtorch
/// drops `owner` when the tensor's storage is freed (PyTorch's
/// `torch.from_numpy`, with the array's lifetime handed over).
pub fn tensor_from_owned<T: OwnedElement>(
    owner: Owner<T>,
    shape: &[i64],
) -> Result<tch::Tensor, ShimError> {
    let mut boxed: Box<Owner<T>> = Box::new(owner);
    let elements = boxed.elements();
    let want: i64 = shape.iter().product();
    if want < 0 || want as usize != elements.len() {
        return Err(ShimError {
            call: "tensor_from_owned",
            message: format!(
                "shape {shape:?} holds {want} elements, the buffer {}",
                elements.len()
            ),
        });
    }
    let data = elements.as_mut_ptr() as *mut c_void;
    let ctx = Box::into_raw(boxed) as *mut c_void;
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: `data` stays valid until `release_owner` drops the box (the
    // elements of a Vec or a pool buffer do not move when the box does).
    let rc = unsafe {
        ss_tensor_from_owned(
            data,
            shape.as_ptr(),
            shape.len() as c_int,
            T::DTYPE,
            release_owner::<T>,
            ctx,
            &mut out,
        )
    };
    check("tensor_from_owned", rc)?;
    // SAFETY: `out` is a heap `at::Tensor*` made by the shim, owned by tch now.
    Ok(unsafe { tch::Tensor::from_ptr(out.cast()) })
}

impl Drop for SideStream {
    fn drop(&mut self) {
        // SAFETY: allocated by `ss_cuda_side_stream`, freed once.
        unsafe { ss_stream_free(self.ptr) }
    }
}

/// While alive, the side stream is libtorch's current stream.
pub struct StreamGuard<'a> {
    ptr: *mut c_void,
    _stream: &'a SideStream,
}

impl Drop for StreamGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by `ss_stream_guard_enter`, freed once.
        unsafe { ss_stream_guard_exit(self.ptr) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_tensors_alias_the_buffer_and_free_it_with_the_last_reference() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Counted(Vec<f32>, Arc<AtomicUsize>);
        impl OwnedBuffer<f32> for Counted {
            fn elements(&mut self) -> &mut [f32] {
                &mut self.0
            }
        }
        impl Drop for Counted {
            fn drop(&mut self) {
                self.1.fetch_add(1, Ordering::SeqCst);
            }
        }
        let freed = Arc::new(AtomicUsize::new(0));
        let owner = Box::new(Counted(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], freed.clone()));
        let t = tensor_from_owned(owner, &[2, 3]).unwrap();
        assert_eq!(t.size(), [2, 3]);
        assert_eq!(t.double_value(&[1, 2]), 6.0);
        let view = t.narrow(1, 1, 2);
        drop(t);
        assert_eq!(freed.load(Ordering::SeqCst), 0, "a view keeps the buffer");
        assert_eq!(view.double_value(&[0, 0]), 2.0);
        drop(view);
        assert_eq!(freed.load(Ordering::SeqCst), 1);
        let wrong = Box::new(Counted(vec![0.0; 5], freed.clone()));
        let err = tensor_from_owned(wrong, &[2, 3]).unwrap_err();
        assert!(
            err.to_string().contains("holds 6 elements, the buffer 5"),
            "{err}"
        );
        assert_eq!(freed.load(Ordering::SeqCst), 2, "a refused buffer is freed");
        let labels = tensor_from_owned::<i64>(Box::new(vec![7i64, 8]), &[2]).unwrap();
        assert_eq!(labels.kind(), tch::Kind::Int64);
        assert_eq!(labels.int64_value(&[1]), 8);
    }

    #[test]
    fn tf32_flags_round_trip_and_cuda_calls_fail_cleanly_without_cuda() {
        set_tf32(Tf32 {
            matmul: false,
            cudnn: false,
        })
        .unwrap();
        assert_eq!(
            tf32().unwrap(),
            Tf32 {
                matmul: false,
                cudnn: false
            }
        );
        // Without CUDA the allocator's calls fail with a message; with it,
        // they answer and a fresh peak is no larger than the reserved pool.
        match (tch::Cuda::is_available(), cuda_memory_stats(0)) {
            (false, Err(e)) => assert!(!e.message.is_empty()),
            (true, Ok(s)) => assert!(s.peak_allocated <= s.peak_reserved, "{s:?}"),
            (cuda, got) => panic!("CUDA available: {cuda}, but the allocator's stats: {got:?}"),
        }
    }
}
