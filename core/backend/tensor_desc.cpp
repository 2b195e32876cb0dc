#include "backend/tensor_desc.h"

#include <stdexcept>
#include <string>

namespace fp8scope {

const char* device_name(Device d) { return d == Device::CUDA ? "cuda" : "cpu"; }

std::size_t dtype_size(DType t) {
    switch (t) {
        case DType::F32: return 4;
        case DType::BF16: return 2;
        case DType::E4M3:
        case DType::E5M2:
        case DType::E8M0: return 1;
    }
    return 0;
}

const char* dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::BF16: return "bf16";
        case DType::E4M3: return "e4m3";
        case DType::E5M2: return "e5m2";
        case DType::E8M0: return "e8m0";
    }
    return "?";
}

float* ActPtr::f32() const {
    if (dtype != DType::F32) throw std::logic_error(std::string("activation buffer is ") + dtype_name(dtype) + ", not f32");
    return reinterpret_cast<float*>(ptr);
}

TensorDesc transposed_view(const TensorDesc& t) {
    TensorDesc v = t;
    v.rows = t.cols;
    v.cols = t.rows;
    v.transposed = !t.transposed;
    return v;
}

}  // namespace fp8scope
