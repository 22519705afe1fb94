// stallscope shim, part 2: libtorch's c10d TCPStore (exported by
// libtorch_cpu.so; no gloo headers needed), the key-value store the ranks'
// per-step barrier runs through. Rank 0 hosts the server. Every function
// catches C++ exceptions; the message is kept for ss_store_last_error().
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <c10/util/Logging.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {
thread_local std::string store_error;

template <typename F>
int store_guarded(F f) {
  try {
    f();
    return 0;
  } catch (const c10::Error& e) {
    store_error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    store_error = e.what();
  } catch (...) {
    store_error = "unknown C++ exception";
  }
  return -1;
}

c10d::TCPStore* as_store(void* s) { return static_cast<c10d::TCPStore*>(s); }
}  // namespace

extern "C" {

const char* ss_store_last_error() { return store_error.c_str(); }

// Open the store at host:port: the server (is_server != 0, listening on
// `port`) or a client that retries connecting until `timeout_ms`. The same
// timeout bounds every later operation. NULL on failure.
void* ss_store_open(const char* host, uint16_t port, int is_server, int64_t timeout_ms) {
  c10d::TCPStore* out = nullptr;
  // c10d logs every connect retry and wait timeout to stderr; the runner
  // reports them itself, once. TORCH_CPP_LOG_LEVEL, when set, wins.
  if (std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr) FLAGS_caffe2_log_level = 3;
  store_guarded([&] {
    c10d::TCPStoreOptions o;
    o.port = port;
    o.isServer = is_server != 0;
    o.waitWorkers = false;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    out = new c10d::TCPStore(std::string(host), o);
  });
  return out;
}

void ss_store_free(void* s) { delete as_store(s); }

// The port the store is at (the server's, when it was opened on port 0).
int ss_store_port(void* s) { return static_cast<int>(as_store(s)->getPort()); }

int ss_store_set(void* s, const char* key, const char* value) {
  return store_guarded([&] {
    std::string v(value);
    as_store(s)->set(std::string(key), std::vector<uint8_t>(v.begin(), v.end()));
  });
}

int ss_store_add(void* s, const char* key, int64_t delta, int64_t* out) {
  return store_guarded([&] { *out = as_store(s)->add(std::string(key), delta); });
}

// 1 when `key` exists, 0 when not, -1 on error.
int ss_store_check(void* s, const char* key) {
  int found = 0;
  int rc = store_guarded([&] { found = as_store(s)->check({std::string(key)}) ? 1 : 0; });
  return rc != 0 ? -1 : found;
}

// The value of `key` into `buf` (at most `cap` bytes, NUL-terminated):
// its length, or -1 on error. Call it for a key known to exist (`get`
// waits for a missing one up to the store's timeout).
int ss_store_get(void* s, const char* key, char* buf, int cap) {
  int len = -1;
  int rc = store_guarded([&] {
    std::vector<uint8_t> v = as_store(s)->get(std::string(key));
    int n = static_cast<int>(std::min<size_t>(v.size(), cap > 0 ? cap - 1 : 0));
    for (int i = 0; i < n; ++i) buf[i] = static_cast<char>(v[i]);
    if (cap > 0) buf[n] = '\0';
    // The whole value's length: the caller asks again with room for it.
    len = static_cast<int>(v.size());
  });
  return rc != 0 ? -1 : len;
}

int ss_store_delete(void* s, const char* key) {
  return store_guarded([&] { as_store(s)->deleteKey(std::string(key)); });
}

// Wait until every key exists: 0 when they do, 1 after `timeout_ms` without
// them (DistStoreError), -1 on any other error (the server is gone).
int ss_store_wait(void* s, const char* const* keys, int n, int64_t timeout_ms) {
  int timed_out = 0;
  int rc = store_guarded([&] {
    std::vector<std::string> k(keys, keys + n);
    try {
      as_store(s)->wait(k, std::chrono::milliseconds(timeout_ms));
    } catch (const c10::DistStoreError& e) {
      const std::string what = e.what_without_backtrace();
      if (what.find("timeout") == std::string::npos) throw;
      store_error = what;
      timed_out = 1;
    }
  });
  return rc != 0 ? -1 : timed_out;
}

}  // extern "C"
