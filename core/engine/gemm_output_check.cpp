// The reference GEMM of a capture step and its hand-over (gemm_output_check.h).
#include "engine/gemm_output_check.h"

#include "engine/op_timer.h"

namespace fp8scope {

GemmOutputCheck::GemmOutputCheck(Backend& backend)
    : backend_(backend), a_(backend.make_operand_storage()), b_(backend.make_operand_storage()), reference_(backend) {}

GemmOutputCheck::~GemmOutputCheck() = default;

void GemmOutputCheck::check(CaptureSink& sink, int layer, int linear, Gemm gemm, const GemmOperand& aq, const TensorDesc& a,
                            Copy ca, const GemmOperand& bq, const TensorDesc& b, Copy cb, const TensorDesc& out,
                            const float* bias, const GemmEpilogue& epi) {
    OpTimer timer(&sink, backend_, "capture", layer, linear);
    // A Gelu epilogue's aux holds the GEMM's result; the reference writes its own.
    const bool gelu = epi.kind == GemmEpilogue::Kind::Gelu;
    const TensorDesc output = gelu ? TensorDesc::of(epi.aux, out.rows, out.cols, out.device) : out;
    GemmOutputCapture c{linear, gemm, output, output, &backend_};
    if (aq.mode != ScalingMode::None || bq.mode != ScalingMode::None) {
        const std::size_t bytes = std::size_t(output.numel()) * dtype_size(output.dtype);
        TensorDesc ref = output;
        ref.data = reference_.grow((bytes + sizeof(float) - 1) / sizeof(float));
        CastSpec high_precision;  // no recipe: the GEMM's own type
        high_precision.rowwise = ca == Copy::Rowwise;
        high_precision.columnwise = ca == Copy::Columnwise;
        const GemmOperand ar = backend_.cast(a, high_precision, *a_);
        high_precision.rowwise = cb == Copy::Rowwise;
        high_precision.columnwise = cb == Copy::Columnwise;
        const GemmOperand br = backend_.cast(b, high_precision, *b_);
        backend_.gemm(ar, ca, br, cb, ref, bias, false, gelu ? GemmEpilogue{} : epi);
        c.reference = ref;
    }
    sink.on_gemm_output(c);
}

}  // namespace fp8scope
