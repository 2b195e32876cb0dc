#include "cpu/cpu_info.h"

#include <cstdlib>
#include <fstream>
#include <string>

namespace fp8scope {
namespace {

// The first value of a /proc/cpuinfo field ("model name", "flags"); arm64 names some
// fields differently, so a missing one is an empty string.
std::string cpuinfo_field(const std::string& field) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, field.size(), field) != 0) continue;
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
    }
    return "";
}

}  // namespace

std::string cpu_model() {
    std::string m = cpuinfo_field("model name");
    return m.empty() ? "unknown CPU" : m;
}

std::string cpu_features() {
    std::string out;
    const char* wanted[] = {"avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_bf16", "amx_tile"};
    std::string all = " ";
    all += cpuinfo_field("flags");
    all += ' ';
    for (const char* w : wanted) {
        if (all.find(std::string(" ") + w + " ") == std::string::npos) continue;
        if (!out.empty()) out += ' ';
        out += w;
    }
    return out.empty() ? "none" : out;
}

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Avx2: return "avx2";
        case Isa::Avx512: return "avx512";
        default: return "generic";
    }
}

Isa cpu_isa() {
    static const Isa isa = [] {
        Isa best = Isa::Generic;
#if defined(__x86_64__)
        __builtin_cpu_init();
        // __builtin_cpu_supports also checks that the OS saves the vector registers.
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
            best = Isa::Avx2;
        if (best == Isa::Avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl"))
            best = Isa::Avx512;
#endif
        const char* want = std::getenv("FP8SCOPE_CPU_ISA");
        const std::string w = want ? want : "";
        if (w == "generic") best = Isa::Generic;
        if (w == "avx2" && best == Isa::Avx512) best = Isa::Avx2;
        return best;
    }();
    return isa;
}

}  // namespace fp8scope
