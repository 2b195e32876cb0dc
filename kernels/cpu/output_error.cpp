// The CPU backend's output error (AnalysisOps::output_error): one pass in double over two
// float32 tensors, in pieces of a fixed size combined in order (a capture step runs it
// once per GEMM; the operand analysis costs several passes per operand).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"

namespace fp8scope {

OutputError CpuBackend::output_error(const TensorDesc& out, const TensorDesc& reference) {
    if (out.rows != reference.rows || out.cols != reference.cols || out.transposed != reference.transposed)
        throw std::logic_error("cpu output_error: output " + std::to_string(out.rows) + "x" +
                               std::to_string(out.cols) + " and reference " + std::to_string(reference.rows) +
                               "x" + std::to_string(reference.cols) + " differ in shape");
    const float* y = cpu_f32(out);
    const float* r = cpu_f32(reference);
    const std::int64_t n = out.numel();
    constexpr std::int64_t kPiece = 1 << 16;
    const std::int64_t pieces = (n + kPiece - 1) / kPiece;
    std::vector<OutputError> part(std::size_t(std::max<std::int64_t>(pieces, 1)));
    for (std::int64_t p = 0; p < pieces; ++p) {
        OutputError& e = part[std::size_t(p)];
        const std::int64_t end = std::min(n, (p + 1) * kPiece);
        for (std::int64_t i = p * kPiece; i < end; ++i) {
            const double ref = r[i], d = double(y[i]) - ref;
            e.signal += ref * ref;
            e.error += d * d;
            e.max_abs = std::max(e.max_abs, float(std::fabs(d)));
        }
    }
    OutputError total;
    for (const OutputError& e : part) {
        total.signal += e.signal;
        total.error += e.error;
        total.max_abs = std::max(total.max_abs, e.max_abs);
    }
    total.count = n;
    return total;
}

}  // namespace fp8scope
