// GEMM operand types from the recipe, the GEMM and the device.
#include "models/gemm_dtypes.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <variant>

#include "fp8/training_recipe.h"

namespace fp8scope::views {

QString GemmDtypes::label() const {
    if (!known()) return QStringLiteral("?");
    const QString acc = emulated.isEmpty() ? QStringLiteral("FP32 acc") : QStringLiteral("FP32 acc; %1 emulated").arg(emulated);
    return QStringLiteral("%1 x %2 -> %3 (%4)").arg(a, b, out, acc);
}

namespace {

GemmDtypes unknown(const QString& why) { return {{}, {}, {}, {}, why}; }

QString format_name(Format f) { return f == Format::E4M3 ? QStringLiteral("E4M3") : QStringLiteral("E5M2"); }

// The operand's code type, or empty for an unquantized one.
QString code_type(const std::optional<Recipe>& r) {
    if (!r) return {};
    return std::visit([](const auto& q) -> QString {
        if constexpr (requires { q.format; }) return format_name(q.format);
        else return QStringLiteral("FP4");
    }, *r);
}

template <class T> bool is(const std::optional<Recipe>& r) { return r && std::holds_alternative<T>(*r); }
bool per_tensor(const std::optional<Recipe>& r) { return is<CurrentScaling>(r) || is<DelayedScaling>(r); }
bool block128(const std::optional<Recipe>& r) { return is<BlockScaling>(r) && std::get<BlockScaling>(*r).block_rows == 128; }

// sm_XY of the CUDA backend's description "cuda: NAME (sm_90), ..."; -1 when absent.
int sm_of(const std::string& machine) {
    const auto at = machine.find("(sm_");
    if (at == std::string::npos) return -1;
    int sm = 0, digits = 0;
    for (std::size_t i = at + 4; i < machine.size() && std::isdigit(static_cast<unsigned char>(machine[i])); ++i, ++digits)
        sm = sm * 10 + (machine[i] - '0');
    return digits >= 2 ? sm : -1;
}

// Why cuBLASLt (GemmRunner::check) refuses the FP8 problem; empty when it takes it.
QString refused(const std::optional<Recipe>& a, const std::optional<Recipe>& b, bool f32_out,
                const std::optional<GemmShape>& s) {
    if (is<MXScaling>(a) || is<MXScaling>(b)) return QStringLiteral("this build has no MX GEMM: both operands dequantized to BF16");
    if (code_type(a) == "FP4" || code_type(b) == "FP4")
        return QStringLiteral("this build has no FP4 GEMM: both operands dequantized to BF16");
    if (!a || !b) return QStringLiteral("an FP8 operand with an unquantized one: both as BF16");
    if (code_type(a) == "E5M2" && code_type(b) == "E5M2") return QStringLiteral("cuBLASLt has no E5M2 x E5M2 kernel");
    if (per_tensor(a) != per_tensor(b)) return QStringLiteral("per-tensor scaling does not mix with block scaling");
    if (block128(a) && block128(b)) return QStringLiteral("cuBLASLt has no 128x128 x 128x128 kernel");
    if (!s) return {};
    if (s->k % 16 != 0) return QStringLiteral("FP8 needs k % 16 == 0");
    if (s->n % (f32_out ? 4 : 8) != 0) return QStringLiteral("FP8 needs output rows of 16 bytes");
    if (!per_tensor(a) && (s->m % 8 != 0 || s->n % 8 != 0)) return QStringLiteral("block-scaled FP8 needs m, n % 8 == 0");
    return {};
}

}  // namespace

GemmDtypes gemm_dtypes(const std::string& recipe, const std::string& op, const std::string& machine,
                       const std::optional<GemmShape>& shape) {
    if (op != "fprop" && op != "dgrad" && op != "wgrad") return unknown(QStringLiteral("not a GEMM of a linear"));
    if (recipe.empty()) return unknown(QStringLiteral("the step records no training recipe"));
    TrainingRecipe t;
    try {
        t = training_recipe(recipe);  // with options too (nvfp4:rht=0)
    } catch (const std::invalid_argument&) {
        return unknown(QStringLiteral("training recipe '%1' is not one this build knows").arg(QString::fromStdString(recipe)));
    }
    // The GEMM's left and right operands (training_recipe.h).
    const std::optional<Recipe>& a = op == "fprop" ? t.x : t.dy;
    const std::optional<Recipe>& b = op == "wgrad" ? t.x : t.w;
    const bool wgrad = op == "wgrad";
    const QString ca = code_type(a), cb = code_type(b);
    const bool quantized = a || b;
    // What an emulated GEMM stands for.
    const QString fp8 = is<MXScaling>(a) || is<MXScaling>(b)         ? QStringLiteral("MXFP8")
                        : is<NVFP4Scaling>(a) || is<NVFP4Scaling>(b) ? QStringLiteral("NVFP4 E2M1")
                        : is<MXFP4Scaling>(a) || is<MXFP4Scaling>(b)
                            ? QStringLiteral("MXFP4 E2M1")
                            : QStringLiteral("%1 x %2").arg(ca.isEmpty() ? "BF16" : ca, cb.isEmpty() ? "BF16" : cb);
    const QString name = QString::fromStdString(recipe);

    if (machine.find("cpu:") != std::string::npos) {
        GemmDtypes d{"F32", "F32", "F32", quantized ? fp8 : QString(), {}};
        d.why = quantized ? QStringLiteral("%1 on the CPU: an sgemm on the dequantized float32 copies").arg(name)
                          : QStringLiteral("%1 on the CPU: a float32 sgemm").arg(name);
        return d;
    }
    if (machine.find("cuda:") == std::string::npos)
        return unknown(QStringLiteral("the trace's machine names no cpu: or cuda: backend"));
    const QString out = wgrad ? QStringLiteral("F32") : QStringLiteral("BF16");
    const QString outs = wgrad ? QStringLiteral("weight gradients in F32") : QStringLiteral("activations in BF16");
    if (!quantized) return {"BF16", "BF16", out, {}, QStringLiteral("%1: unquantized operands as BF16, %2").arg(name, outs)};
    const int sm = sm_of(machine);
    QString why = refused(a, b, wgrad, shape);
    if (why.isEmpty()) {
        if (sm < 0) return unknown(QStringLiteral("the machine string gives no sm_ version, which decides FP8 tensor cores"));
        if (sm < 89) why = QStringLiteral("sm_%1 has no FP8 tensor cores").arg(sm);
        else if (!per_tensor(a) && sm != 90)
            return unknown(QStringLiteral("whether cuBLASLt has block-scaled FP8 kernels on sm_%1 is not recorded").arg(sm));
    }
    if (!why.isEmpty())
        return {"BF16", "BF16", out, fp8, QStringLiteral("%1 on CUDA: %2; %3").arg(name, why, outs)};
    return {ca, cb, out, {}, QStringLiteral("%1 on FP8 tensor cores (sm_%2), %3 scaling, float32 accumulation, %4")
                                 .arg(name).arg(sm).arg(per_tensor(a) ? "per-tensor" : "block", outs)};
}

}  // namespace fp8scope::views
