// What every backend role speaks in: the device, the element types, and non-owning
// descriptors of backend memory (Transformer Engine's tensor in spirit): a pointer into
// an activation buffer (ActPtr) and a 2-D view (TensorDesc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fp8scope {

enum class Device : std::uint8_t { CPU, CUDA };
const char* device_name(Device d);  // "cpu", "cuda"

enum class DType : std::uint8_t { F32, BF16, E4M3, E5M2, E8M0 };
std::size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", "e4m3", "e5m2", "e8m0"

// A pointer into an activation buffer: element offsets scale by the buffer's dtype, so
// the model carves and indexes its activations the same way on every backend.
struct ActPtr {
    std::byte* ptr = nullptr;
    DType dtype = DType::F32;

    ActPtr operator+(std::int64_t elements) const {
        return {ptr ? ptr + elements * std::int64_t(dtype_size(dtype)) : nullptr, dtype};
    }
    explicit operator bool() const { return ptr != nullptr; }
    float* f32() const;  // the CPU backend's view; throws unless dtype is F32
};

// A non-owning 2-D row-major view of backend memory; `transposed` marks a view of the
// transpose of data stored as (cols, rows), so a GEMM can read it without a copy.
struct TensorDesc {
    void* data = nullptr;
    DType dtype = DType::F32;
    std::int64_t rows = 0, cols = 0;
    Device device = Device::CPU;
    bool transposed = false;

    std::int64_t numel() const { return rows * cols; }
    static TensorDesc of(ActPtr p, std::int64_t rows, std::int64_t cols, Device d) {
        return {p.ptr, p.dtype, rows, cols, d, false};
    }
    static TensorDesc of(const float* p, std::int64_t rows, std::int64_t cols, Device d) {
        return {const_cast<float*>(p), DType::F32, rows, cols, d, false};
    }
};

// The transpose of t as a view of the same memory (a transposed view's transpose is t).
TensorDesc transposed_view(const TensorDesc& t);

}  // namespace fp8scope
