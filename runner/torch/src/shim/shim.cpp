// stallscope shim: what tch does not expose, through libtorch's device-generic
// C++ API only (no CUDA header, no CUDA library at build time). Every function
// catches C++ exceptions and reports them through ss_last_error().
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/headeronly/version.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

namespace {
thread_local std::string last_error;

template <typename F>
int guarded(F f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown C++ exception";
  }
  return -1;
}

c10::DeviceAllocator* cuda_allocator() {
  return c10::getDeviceAllocator(c10::DeviceType::CUDA);
}
}  // namespace

extern "C" {

const char* ss_last_error() { return last_error.c_str(); }

// The libtorch version the shim was compiled against (the pinned 2.11.0).
const char* ss_torch_version() { static const std::string v = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." + std::to_string(TORCH_VERSION_PATCH); return v.c_str(); }

int ss_set_tf32(int matmul, int cudnn) {
  return guarded([&] {
    at::globalContext().setAllowTF32CuBLAS(matmul != 0);
    at::globalContext().setAllowTF32CuDNN(cudnn != 0);
  });
}

int ss_get_tf32(int* matmul, int* cudnn) {
  return guarded([&] {
    *matmul = at::globalContext().allowTF32CuBLAS() ? 1 : 0;
    *cudnn = at::globalContext().allowTF32CuDNN() ? 1 : 0;
  });
}

// Caching-allocator counters of one CUDA device: current and peak bytes
// allocated to tensors and reserved from the driver.
int ss_cuda_memory_stats(int device, uint64_t* out4) {
  return guarded([&] {
    auto stats = cuda_allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto agg = static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE);
    out4[0] = static_cast<uint64_t>(stats.allocated_bytes[agg].current);
    out4[1] = static_cast<uint64_t>(stats.allocated_bytes[agg].peak);
    out4[2] = static_cast<uint64_t>(stats.reserved_bytes[agg].current);
    out4[3] = static_cast<uint64_t>(stats.reserved_bytes[agg].peak);
  });
}

int ss_cuda_reset_peak(int device) {
  return guarded([&] { cuda_allocator()->resetPeakStats(static_cast<c10::DeviceIndex>(device)); });
}

int ss_cuda_empty_cache() {
  return guarded([&] { cuda_allocator()->emptyCache(); });
}

// cudaMemGetInfo through the CUDA allocator.
int ss_cuda_mem_info(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  return guarded([&] {
    auto info = cuda_allocator()->getMemoryInfo(static_cast<c10::DeviceIndex>(device));
    *free_bytes = info.first;
    *total_bytes = info.second;
  });
}

// Allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax, e.g.
// "per_process_memory_fraction:0.25".
int ss_set_allocator_settings(const char* settings) {
  return guarded([&] { c10::CachingAllocator::setAllocatorSettings(std::string(settings)); });
}

// A side stream from the CUDA stream pool, owned by the caller.
void* ss_cuda_side_stream(int device) {
  void* out = nullptr;
  guarded([&] {
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    auto s = impl->getStreamFromGlobalPool(
        c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)), false);
    out = new c10::Stream(s);
  });
  return out;
}

void ss_stream_free(void* stream) { delete static_cast<c10::Stream*>(stream); }

// Make `stream` current until the guard is dropped.
void* ss_stream_guard_enter(void* stream) {
  void* out = nullptr;
  guarded([&] { out = new c10::StreamGuard(*static_cast<c10::Stream*>(stream)); });
  return out;
}

void ss_stream_guard_exit(void* guard) { delete static_cast<c10::StreamGuard*>(guard); }

int ss_stream_synchronize(void* stream) {
  return guarded([&] { static_cast<c10::Stream*>(stream)->synchronize(); });
}

// The device's current stream waits (on the device, not the host) for the
// work queued so far on `stream`.
int ss_current_stream_wait(void* stream) {
  return guarded([&] {
    auto* s = static_cast<c10::Stream*>(stream);
    c10::Event ev(s->device_type());
    ev.record(*s);
    const auto* impl = c10::impl::getDeviceGuardImpl(s->device_type());
    ev.block(impl->getStream(s->device()));
  });
}

// Mark `tensor` (an at::Tensor*, as tch holds it) as used by its device's
// current stream, so the caching allocator does not hand its memory out again
// before that stream's queued work is done (it was allocated on a side stream).
int ss_record_on_current_stream(void* tensor) {
  return guarded([&] {
    auto* t = static_cast<at::Tensor*>(tensor);
    const auto* impl = c10::impl::getDeviceGuardImpl(t->device().type());
    t->record_stream(impl->getStream(t->device()));
  });
}

// A CPU tensor over memory the caller owns: `release(ctx)` runs when the
// last reference to the tensor's storage goes, on whatever thread that is.
// On failure `release(ctx)` has run before the return. dtype: 0 float32,
// 1 int64, 2 uint8.
int ss_tensor_from_owned(void* data, const int64_t* sizes, int ndim, int dtype,
                         void (*release)(void*), void* ctx, void** out) {
  bool owned = false;
  int rc = guarded([&] {
    c10::ScalarType st =
        dtype == 0 ? at::kFloat : (dtype == 1 ? at::kLong : at::kByte);
    at::Tensor t = at::from_blob(
        data, c10::IntArrayRef(sizes, static_cast<size_t>(ndim)),
        [release, ctx](void*) { release(ctx); },
        at::TensorOptions().dtype(st));
    owned = true;
    *out = new at::Tensor(std::move(t));
  });
  if (!owned) release(ctx);
  return rc;
}

}  // extern "C"
