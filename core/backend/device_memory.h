// A backend's memory role: allocations, copies between the host and the device, type
// conversions and the wait for the device.
//
// Pointers into backend memory are valid only for that backend. Calls are ordered as
// issued; results a host reads (losses, norms, cast reports) are ready after synchronize().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/tensor_desc.h"

namespace fp8scope {

// Device arrays copied to host memory while the device goes on working (checkpoints).
// start() takes the arrays as the ops issued before it leave them: an op issued after it
// may overwrite them in place without changing what lands on the host. wait() (from any
// thread) returns once the copy has landed in host(), back to back in start()'s order.
// One copy at a time: host() is the last start()'s until the next start(), which must not
// come before the reader of host() is done with it.
class HostSnapshot {
public:
    struct Region {
        const void* src;  // backend memory
        std::size_t bytes;
    };
    virtual ~HostSnapshot() = default;  // waits for a copy in flight
    // Host memory for copies of `bytes` made ahead (a GPU pins it: seconds for many GB,
    // better spent before training than at its first checkpoint).
    virtual void reserve(std::size_t bytes) = 0;
    virtual void start(const std::vector<Region>& regions) = 0;
    virtual void wait() = 0;
    virtual const std::uint8_t* host() const = 0;
    // How the last copy went, in words (a GPU: staged in device memory or straight over
    // PCIe, and why), for the run's output and benchmarks.
    virtual std::string route() const { return "copied on the host"; }
};

// Where a GPU's snapshot is copied from (kernels/cuda/cuda_backend_host_snapshot.cpp):
// Staging copies the arrays within device memory first and to the host from there, so the
// next op that writes them waits only for that fast copy; Direct copies them to the host
// from where they lie, and the next op that writes them waits for the whole copy (no
// device memory spent); Auto stages when the device has the memory to spare.
enum class SnapshotStaging { Auto, Staging, Direct };

class DeviceMemory {
public:
    virtual ~DeviceMemory() = default;

    virtual void* allocate(std::size_t bytes) = 0;  // zero-filled
    virtual void release(void* p) = 0;
    virtual void copy_to_host(void* host, const void* src, std::size_t bytes) = 0;
    virtual void copy_from_host(void* dst, const void* host, std::size_t bytes) = 0;
    virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void fill_zero(void* p, std::size_t bytes) = 0;
    // out (n, `to`) = in (n, `from`): float32 <-> BF16 (round to nearest even, NaN kept).
    virtual void convert(void* out, DType to, const void* in, DType from, std::int64_t n) = 0;
    virtual void synchronize() = 0;
    // The default copies at once with copy_to_host (the CPU's: its memory is the host's).
    virtual std::unique_ptr<HostSnapshot> make_host_snapshot(SnapshotStaging staging = SnapshotStaging::Auto);
};

// Owns one allocation of backend memory, of a fixed type; grows on demand (contents lost).
template <class T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(DeviceMemory& m, std::size_t n = 0) : memory_(&m) { resize(n); }
    ~DeviceBuffer() { reset(); }
    DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            memory_ = o.memory_;
            ptr_ = o.ptr_;
            size_ = o.size_;
            o.ptr_ = nullptr;
            o.size_ = 0;
        }
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void bind(DeviceMemory& m) { reset(), memory_ = &m; }
    // At least n elements (zero-filled when it grows).
    T* grow(std::size_t n) {
        if (n > size_) resize(n);
        return ptr_;
    }
    void resize(std::size_t n) {
        reset();
        if (n) ptr_ = static_cast<T*>(memory_->allocate(n * sizeof(T)));
        size_ = n;
    }
    void reset() {
        if (ptr_) memory_->release(ptr_);
        ptr_ = nullptr;
        size_ = 0;
    }
    T* data() const { return ptr_; }
    std::size_t size() const { return size_; }

private:
    DeviceMemory* memory_ = nullptr;
    T* ptr_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace fp8scope
