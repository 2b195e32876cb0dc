// GEMM operand types against a table written by hand from training_recipe.cpp's rules
// (X, W E4M3; dY E5M2 for the HYBRID recipes, E4M3 for the others; MX on no tensor core
// of this build) and the CUDA backend's (activations BF16, weight gradients F32, FP8
// kernels where cuBLASLt has them); every training recipe of the engine has its rows.
#include <QTest>
#include <set>

#include "fp8/training_recipe.h"
#include "models/gemm_dtypes.h"

using namespace fp8scope;
using namespace fp8scope::views;

namespace {

const std::string kH200 = "vm (cuda: NVIDIA H200 (sm_90), 139.8 GiB, CUDA runtime 13.0, cuBLASLt 13.1.0)";
const std::string kA100 = "gpu1 (cuda: NVIDIA A100-SXM4-80GB (sm_80), 79.1 GiB, CUDA runtime 12.8, cuBLASLt 12.8.4)";
const std::string kB200 = "gpu2 (cuda: NVIDIA B200 (sm_100), 178.4 GiB, CUDA runtime 13.0, cuBLASLt 13.1.0)";
const std::string kCpu = "box (cpu: AMD EPYC 9654, 2 threads, avx512 kernels, OpenBLAS 0.3.26)";

struct Expected {
    const char* recipe;
    const char* fprop;
    const char* dgrad;
    const char* wgrad;
};
// On an H200.
const Expected kOnH200[] = {
    {"baseline", "BF16 x BF16 -> BF16 (FP32 acc)", "BF16 x BF16 -> BF16 (FP32 acc)", "BF16 x BF16 -> F32 (FP32 acc)"},
    {"delayed", "E4M3 x E4M3 -> BF16 (FP32 acc)", "E5M2 x E4M3 -> BF16 (FP32 acc)", "E5M2 x E4M3 -> F32 (FP32 acc)"},
    {"delayed_e4m3", "E4M3 x E4M3 -> BF16 (FP32 acc)", "E4M3 x E4M3 -> BF16 (FP32 acc)", "E4M3 x E4M3 -> F32 (FP32 acc)"},
    {"current", "E4M3 x E4M3 -> BF16 (FP32 acc)", "E5M2 x E4M3 -> BF16 (FP32 acc)", "E5M2 x E4M3 -> F32 (FP32 acc)"},
    {"blockwise", "E4M3 x E4M3 -> BF16 (FP32 acc)", "E4M3 x E4M3 -> BF16 (FP32 acc)", "E4M3 x E4M3 -> F32 (FP32 acc)"},
    {"mxfp8", "BF16 x BF16 -> BF16 (FP32 acc; MXFP8 emulated)", "BF16 x BF16 -> BF16 (FP32 acc; MXFP8 emulated)",
     "BF16 x BF16 -> F32 (FP32 acc; MXFP8 emulated)"},
    {"nvfp4", "BF16 x BF16 -> BF16 (FP32 acc; NVFP4 E2M1 emulated)", "BF16 x BF16 -> BF16 (FP32 acc; NVFP4 E2M1 emulated)",
     "BF16 x BF16 -> F32 (FP32 acc; NVFP4 E2M1 emulated)"},
    {"mxfp4", "BF16 x BF16 -> BF16 (FP32 acc; MXFP4 E2M1 emulated)", "BF16 x BF16 -> BF16 (FP32 acc; MXFP4 E2M1 emulated)",
     "BF16 x BF16 -> F32 (FP32 acc; MXFP4 E2M1 emulated)"},
};
// On the CPU: an sgemm on the dequantized copies.
const Expected kOnCpu[] = {
    {"baseline", "F32 x F32 -> F32 (FP32 acc)", "F32 x F32 -> F32 (FP32 acc)", "F32 x F32 -> F32 (FP32 acc)"},
    {"delayed", "F32 x F32 -> F32 (FP32 acc; E4M3 x E4M3 emulated)", "F32 x F32 -> F32 (FP32 acc; E5M2 x E4M3 emulated)",
     "F32 x F32 -> F32 (FP32 acc; E5M2 x E4M3 emulated)"},
    {"delayed_e4m3", "F32 x F32 -> F32 (FP32 acc; E4M3 x E4M3 emulated)", "F32 x F32 -> F32 (FP32 acc; E4M3 x E4M3 emulated)",
     "F32 x F32 -> F32 (FP32 acc; E4M3 x E4M3 emulated)"},
    {"current", "F32 x F32 -> F32 (FP32 acc; E4M3 x E4M3 emulated)", "F32 x F32 -> F32 (FP32 acc; E5M2 x E4M3 emulated)",
     "F32 x F32 -> F32 (FP32 acc; E5M2 x E4M3 emulated)"},
    {"blockwise", "F32 x F32 -> F32 (FP32 acc; E4M3 x E4M3 emulated)", "F32 x F32 -> F32 (FP32 acc; E4M3 x E4M3 emulated)",
     "F32 x F32 -> F32 (FP32 acc; E4M3 x E4M3 emulated)"},
    {"mxfp8", "F32 x F32 -> F32 (FP32 acc; MXFP8 emulated)", "F32 x F32 -> F32 (FP32 acc; MXFP8 emulated)",
     "F32 x F32 -> F32 (FP32 acc; MXFP8 emulated)"},
    {"nvfp4", "F32 x F32 -> F32 (FP32 acc; NVFP4 E2M1 emulated)", "F32 x F32 -> F32 (FP32 acc; NVFP4 E2M1 emulated)",
     "F32 x F32 -> F32 (FP32 acc; NVFP4 E2M1 emulated)"},
    {"mxfp4", "F32 x F32 -> F32 (FP32 acc; MXFP4 E2M1 emulated)", "F32 x F32 -> F32 (FP32 acc; MXFP4 E2M1 emulated)",
     "F32 x F32 -> F32 (FP32 acc; MXFP4 E2M1 emulated)"},
};

QString label(const std::string& recipe, const char* op, const std::string& machine, std::optional<GemmShape> s = {}) {
    return gemm_dtypes(recipe, op, machine, s).label();
}

}  // namespace

class GemmDtypesTest : public QObject {
    Q_OBJECT
private slots:
    void everyRecipeOnEachDevice() {
        for (const auto* table : {kOnH200, kOnCpu}) {
            const std::string& machine = table == kOnH200 ? kH200 : kCpu;
            std::set<std::string> covered;
            for (const Expected* e = table; e != table + std::size(kOnH200); ++e) {
                covered.insert(e->recipe);
                QCOMPARE(label(e->recipe, "fprop", machine), QString(e->fprop));
                QCOMPARE(label(e->recipe, "dgrad", machine), QString(e->dgrad));
                QCOMPARE(label(e->recipe, "wgrad", machine), QString(e->wgrad));
            }
            const auto names = training_recipe_names();
            QCOMPARE(covered, std::set<std::string>(names.begin(), names.end()));
        }
    }

    void cublasltRefusesGoEmulated() {
        // No FP8 tensor cores before sm_89.
        QCOMPARE(label("current", "fprop", kA100), QString("BF16 x BF16 -> BF16 (FP32 acc; E4M3 x E4M3 emulated)"));
        QCOMPARE(label("baseline", "fprop", kA100), QString("BF16 x BF16 -> BF16 (FP32 acc)"));
        // k % 16, 16-byte output rows, block scaling's m % 8.
        QCOMPARE(label("current", "fprop", kH200, GemmShape{4096, 3072, 1000}),
                 QString("BF16 x BF16 -> BF16 (FP32 acc; E4M3 x E4M3 emulated)"));
        QCOMPARE(label("delayed", "wgrad", kH200, GemmShape{3072, 1020, 4096}), QString("E5M2 x E4M3 -> F32 (FP32 acc)"));
        QCOMPARE(label("delayed", "dgrad", kH200, GemmShape{4096, 1020, 3072}),
                 QString("BF16 x BF16 -> BF16 (FP32 acc; E5M2 x E4M3 emulated)"));
        QCOMPARE(label("blockwise", "fprop", kH200, GemmShape{4092, 3072, 1024}),
                 QString("BF16 x BF16 -> BF16 (FP32 acc; E4M3 x E4M3 emulated)"));
        QCOMPARE(label("current", "fprop", kH200, GemmShape{4092, 3072, 1024}), QString("E4M3 x E4M3 -> BF16 (FP32 acc)"));
    }

    void unknownsSayWhy() {
        const auto blackwell = gemm_dtypes("blockwise", "fprop", kB200);
        QCOMPARE(blackwell.label(), QString("?"));
        QVERIFY(blackwell.why.contains("sm_100"));
        QCOMPARE(label("current", "fprop", kB200), QString("E4M3 x E4M3 -> BF16 (FP32 acc)"));
        const auto unknown = gemm_dtypes("fp6", "fprop", kH200);
        QCOMPARE(unknown.label(), QString("?"));
        QVERIFY(unknown.why.contains("'fp6'"));
        QCOMPARE(label("", "fprop", kH200), QString("?"));
        QCOMPARE(label("current", "fprop", "vm"), QString("?"));
        QCOMPARE(label("current", "fprop", "vm (cuda: GPU)"), QString("?"));
        QCOMPARE(label("current", "attention", kH200), QString("?"));
        // An unquantized GEMM needs no device generation.
        QCOMPARE(label("baseline", "wgrad", "vm (cuda: GPU)"), QString("BF16 x BF16 -> F32 (FP32 acc)"));
    }
};

QTEST_GUILESS_MAIN(GemmDtypesTest)
#include "test_gemm_dtypes.moc"
