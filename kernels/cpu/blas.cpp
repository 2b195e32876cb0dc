// OpenBLAS kernel choice (see blas.h). The switch goes through symbols that only
// DYNAMIC_ARCH builds export; they are looked up with dlsym, so any other OpenBLAS (a
// static or single-target build) simply keeps its kernel.
#include "cpu/blas.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace fp8scope::blas {
namespace {

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string upper(std::string s) {
    for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// This library has the kernel table of `name` (OpenBLAS names them gotoblas_<NAME>).
bool has_kernel(const std::string& name) { return dlsym(RTLD_DEFAULT, ("gotoblas_" + upper(name)).c_str()); }

using InitFn = void (*)();
InitFn symbol(const char* name) { return reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, name)); }

#if defined(__x86_64__)
// Vector ISA level of an OpenBLAS x86-64 kernel: 3 AVX-512, 2 AVX2, 1 AVX, 0 SSE.
int kernel_level(const std::string& kernel) {
    const std::string k = lower(kernel);
    if (k == "skylakex" || k == "cooperlake" || k == "sapphirerapids") return 3;
    if (k == "haswell" || k == "zen") return 2;
    if (k == "sandybridge" || k == "bulldozer" || k == "piledriver" || k == "steamroller" || k == "excavator")
        return 1;
    return 0;
}

// Kernels for this CPU, best first: one per ISA level it supports (what OpenBLAS itself
// picks for a known CPU of that level), then the generic one.
std::vector<std::string> candidates() {
    __builtin_cpu_init();
    std::vector<std::string> out;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512cd");
    if (avx512) {
        if (__builtin_cpu_supports("avx512bf16")) out.push_back("Cooperlake");
        out.push_back("SkylakeX");
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        out.push_back(__builtin_cpu_is("amd") ? "Zen" : "Haswell");
    if (__builtin_cpu_supports("avx")) out.push_back("Sandybridge");
    out.push_back("Prescott");
    return out;
}
#elif defined(__aarch64__)
// arm64: OpenBLAS falls back to its generic ARMV8 kernel on cores it does not know; the
// Neoverse N1 kernel (NEON) runs on every ARMv8.2 core (LSE atomics and dot product are
// the markers of one).
int kernel_level(const std::string& kernel) { return lower(kernel) == "armv8" ? 0 : 1; }

std::vector<std::string> candidates() {
    std::vector<std::string> out;
    const unsigned long hw = getauxval(AT_HWCAP);
    if ((hw & HWCAP_ASIMD) && (hw & HWCAP_ATOMICS) && (hw & HWCAP_ASIMDDP)) out.push_back("NeoverseN1");
    out.push_back("ARMV8");
    return out;
}
#else
int kernel_level(const std::string&) { return 0; }
std::vector<std::string> candidates() { return {}; }
#endif

// Runs OpenBLAS's kernel selection again with OPENBLAS_CORETYPE = kernel (restored after).
bool switch_to(const std::string& kernel) {
    InitFn quit = symbol("gotoblas_dynamic_quit"), init = symbol("gotoblas_dynamic_init");
    if (!quit || !init || !has_kernel(kernel)) return false;
    const char* user = std::getenv("OPENBLAS_CORETYPE");
    const std::string saved = user ? user : "";
    setenv("OPENBLAS_CORETYPE", kernel.c_str(), 1);
    quit();
    init();
    if (user) setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
    else unsetenv("OPENBLAS_CORETYPE");
    return lower(openblas_get_corename()) == lower(kernel);
}

std::mutex& switch_mutex() {
    static std::mutex mu;
    return mu;
}

}  // namespace

const KernelChoice& init() {
    static const KernelChoice choice = [] {
        std::lock_guard lock(switch_mutex());
        KernelChoice c;
        c.detected = c.kernel = openblas_get_corename();
        const char* user = std::getenv("OPENBLAS_CORETYPE");
        if (user && *user) {
            c.reason = "OPENBLAS_CORETYPE";
            return c;
        }
        c.reason = "detected by OpenBLAS";
        for (const std::string& k : candidates()) {
            if (kernel_level(k) <= kernel_level(c.detected)) break;  // OpenBLAS's choice is as good
            if (switch_to(k)) {
                c.reason = "chosen from the CPU's features; OpenBLAS detected " + c.detected;
                break;
            }
            switch_to(c.detected);  // a kernel that did not take: back to OpenBLAS's own
        }
        c.kernel = openblas_get_corename();
        return c;
    }();
    return choice;
}

std::vector<std::string> runnable_kernels() {
    std::vector<std::string> out;
    for (const std::string& k : candidates())
        if (has_kernel(k)) out.push_back(k);
    return out;
}

bool use_kernel(const std::string& kernel) {
    init();
    std::lock_guard lock(switch_mutex());
    return lower(openblas_get_corename()) == lower(kernel) || switch_to(kernel);
}

std::string current_kernel() { return openblas_get_corename(); }

std::string description() {
    const KernelChoice& c = init();
    return std::string(openblas_get_config()) + ", kernel " + current_kernel() + " (" + c.reason + ")";
}

}  // namespace fp8scope::blas
