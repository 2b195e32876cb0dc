#include "backend.h"

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

void check_decay_runs(const std::vector<DecayRun>& runs, std::int64_t n) {
    std::int64_t after = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const DecayRun& r = runs[i];
        if (r.begin < after || r.end <= r.begin || r.end > n)
            throw std::invalid_argument("adamw: decay run " + std::to_string(i) + " [" + std::to_string(r.begin) + ", " +
                                        std::to_string(r.end) + ") is empty, out of [0, " + std::to_string(n) +
                                        ") or not after the run before it");
        after = r.end;
    }
}

void Backend::gemm_then_epilogue(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb,
                                   const TensorDesc& out, const float* bias, bool accumulate,
                                   const GemmEpilogue& epi) {
    const ActPtr y{static_cast<std::byte*>(out.data), out.dtype};
    switch (epi.kind) {
    case GemmEpilogue::Kind::None:
        return gemm(a, ca, b, cb, out, bias, accumulate, epi);
    case GemmEpilogue::Kind::Gelu:
        gemm(a, ca, b, cb, TensorDesc{epi.aux.ptr, epi.aux.dtype, out.rows, out.cols, out.device, false}, bias,
             accumulate, {});
        return gelu_forward(y, epi.aux, out.numel());
    case GemmEpilogue::Kind::GeluBackward:
        if (bias || accumulate) throw std::logic_error("gemm: a GELU backward takes no bias and no accumulation");
        gemm(a, ca, b, cb, out, nullptr, false, {});
        return gelu_backward(y, epi.aux, y, out.numel());
    }
}

float* ActPtr::f32() const {
    if (dtype != DType::F32) throw std::logic_error(std::string("activation buffer is ") + dtype_name(dtype) + ", not f32");
    return reinterpret_cast<float*>(ptr);
}

}  // namespace fp8scope
