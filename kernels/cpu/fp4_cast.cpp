// The CPU backend's FP4 cast (fp4_cast.h) over fp4.h's dequantized cast.
#include "cpu/fp4_cast.h"

#include <optional>
#include <variant>

#include "cpu/cpu_backend.h"
#include "cpu/fp4.h"

namespace fp8scope {
namespace {

float* grow(std::vector<float>& v, std::int64_t n) {
    if (v.size() < std::size_t(n)) v.resize(std::size_t(n));
    return v.data();
}

// The quantizer with rht off: what the rowwise copy is cast with.
Recipe without_rht(Recipe r) {
    std::visit([](auto& q) { if constexpr (requires { q.rht; }) q.rht = false; }, r);
    return r;
}

}  // namespace

GemmOperand cast_fp4(const TensorDesc& x, const CastSpec& spec, std::vector<float>& rowwise,
                     std::vector<float>& columnwise) {
    const Recipe& r = *spec.recipe;
    const FP4Plan plan = fp4_plan(r, 0.0f);
    const bool by_transpose = plan.block_rows == plan.block_cols && !plan.rht;  // 16x16 tiles
    const MatrixView v{cpu_f32(x), x.rows, x.cols};
    GemmOperand op = operand_of(r);
    op.emulated = true;

    std::optional<CastInfo> info;
    if (spec.rowwise || (spec.columnwise && by_transpose)) {
        info = fp4_fake_quantize(v, without_rht(r), grow(rowwise, x.numel()), spec.rounding);
        op.rowwise = TensorDesc{rowwise.data(), DType::F32, x.rows, x.cols, Device::CPU, false};
    }
    if (spec.columnwise) {
        if (by_transpose) {
            op.columnwise = transposed_view(op.rowwise);
        } else {  // x^T (transformed) into its buffer, cast there
            float* t = grow(columnwise, x.numel());
            fp4_fake_quantize_transposed(v, r, t, cast::columnwise_key(spec.rounding));
            op.columnwise = TensorDesc{t, DType::F32, x.cols, x.rows, Device::CPU, false};
        }
    }
    if (spec.report && info) *spec.report = *info;  // scale NaN: block scales
    if (spec.amax_out && info) *spec.amax_out = info->amax;
    if (!spec.rowwise) op.rowwise = {};
    return op;
}

}  // namespace fp8scope
