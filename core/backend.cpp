#include "backend.h"

#include <stdexcept>

namespace fp8scope {

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

}  // namespace fp8scope
