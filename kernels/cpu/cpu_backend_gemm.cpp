// The CPU backend's casts and GEMMs (design in cpu_backend.h): the operand storage, the
// delayed-scaling history in host memory, cast() over the fake-quantize cast
// (kernels/cpu/quantize.h; FP4 quantizers: fp4_cast.h) and gemm() as an sgemm on the
// dequantized copies.
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/fp4_cast.h"
#include "cpu/ops/matmul.h"
#include "cpu/quantize.h"

namespace fp8scope {
namespace {

struct CpuStorage final : OperandStorage {
    std::vector<float> rowwise, columnwise, transposed;  // cast copies; x^T before its cast
};

class CpuAmaxHistory final : public AmaxHistory {
public:
    explicit CpuAmaxHistory(const DelayedScaling& r) : state(r) {}
    const DelayedScaling& recipe() const override { return state.recipe(); }
    DelayedState read() const override { return state; }
    void restore(const DelayedState& s) override { state.restore(s.history(), s.scale()); }
    void push(const float* amax) override { state.push(*amax); }
    DelayedState state;
};

float* grow(std::vector<float>& v, std::int64_t n) {
    if (v.size() < std::size_t(n)) v.resize(std::size_t(n));
    return v.data();
}

}  // namespace

std::unique_ptr<OperandStorage> CpuBackend::make_operand_storage() { return std::make_unique<CpuStorage>(); }

std::unique_ptr<AmaxHistory> CpuBackend::make_amax_history(const DelayedScaling& recipe) {
    return std::make_unique<CpuAmaxHistory>(recipe);
}

GemmOperand CpuBackend::cast(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage) {
    if (!spec.recipe) {  // float32 is the GEMM's own type: the operand is x itself
        GemmOperand op;
        op.rowwise = x;
        op.columnwise = transposed_view(x);
        return op;
    }
    const Recipe& r = *spec.recipe;
    auto& s = static_cast<CpuStorage&>(storage);
    if (is_fp4(r)) return cast_fp4(x, spec, s.rowwise, s.columnwise);
    DelayedState* live = spec.history ? &static_cast<CpuAmaxHistory*>(spec.history)->state : nullptr;
    const bool by_transpose = columnwise_is_transpose(r);
    const MatrixView v{cpu_f32(x), x.rows, x.cols};

    GemmOperand op = operand_of(r);
    op.emulated = true;
    auto rowwise_desc = [&] { return TensorDesc{s.rowwise.data(), DType::F32, x.rows, x.cols, Device::CPU, false}; };
    auto columnwise_desc = [&] { return TensorDesc{s.columnwise.data(), DType::F32, x.cols, x.rows, Device::CPU, false}; };

    // Both copies cast with the scale in force before this cast's push; only the rowwise
    // cast pushes (a columnwise-only cast of a delayed operand is a transposed view).
    std::optional<CastInfo> info;  // of the rowwise cast, when there is one
    if (spec.rowwise && spec.columnwise && !by_transpose && has_cast_transpose(r)) {
        // 1 x B tiles and MX: both copies in one pass over x.
        info = fake_quantize_transposed(v, r, grow(s.rowwise, x.numel()), grow(s.columnwise, x.numel()));
        op.rowwise = rowwise_desc();
        op.columnwise = columnwise_desc();
    } else {
        if (spec.rowwise || (spec.columnwise && by_transpose)) {
            if (live && !spec.push) {
                DelayedState scratch(*live);
                info = fake_quantize(v, r, grow(s.rowwise, x.numel()), &scratch);
            } else {
                info = fake_quantize(v, r, grow(s.rowwise, x.numel()), live);
            }
            op.rowwise = rowwise_desc();
        }
        if (spec.columnwise) {
            if (by_transpose) {
                op.columnwise = transposed_view(op.rowwise);
            } else {  // blocks of other shapes: cast the transpose
                ops::transpose(grow(s.transposed, x.numel()), v.data, x.rows, x.cols);
                fake_quantize(MatrixView{s.transposed.data(), x.cols, x.rows}, r, grow(s.columnwise, x.numel()));
                op.columnwise = columnwise_desc();
            }
        }
    }
    if (spec.report && info) *spec.report = *info;
    if (spec.amax_out && info) *spec.amax_out = info->amax;
    if (!spec.rowwise) op.rowwise = {};
    return op;
}

void CpuBackend::gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                      const float* bias, bool accumulate, const GemmEpilogue& epi) {
    if (epi.kind != GemmEpilogue::Kind::None) return gemm_then_epilogue(a, ca, b, cb, out, bias, accumulate, epi);
    const TensorDesc& A = ca == Copy::Rowwise ? a.rowwise : a.columnwise;  // (m,k)
    const TensorDesc& B = cb == Copy::Rowwise ? b.rowwise : b.columnwise;  // (n,k)
    if (!A.data || !B.data || A.cols != B.cols || out.rows != A.rows || out.cols != B.rows)
        throw std::logic_error("cpu gemm: operands (" + std::to_string(A.rows) + "x" + std::to_string(A.cols) + ", " +
                               std::to_string(B.rows) + "x" + std::to_string(B.cols) + ") do not give " +
                               std::to_string(out.rows) + "x" + std::to_string(out.cols));
    // A view of a transpose is read with the transpose flag; B is read transposed.
    ops::sgemm(A.transposed, !B.transposed, A.rows, B.rows, A.cols, cpu_f32(A), cpu_f32(B), cpu_f32(out),
               accumulate ? 1.0f : 0.0f);
    if (bias) ops::add_bias(cpu_f32(out), bias, out.rows, out.cols);
}

void CpuBackend::bias_backward(float* dbias, const TensorDesc& dout) {
    ops::bias_backward(dbias, cpu_f32(dout), dout.rows, dout.cols);
}

}  // namespace fp8scope
