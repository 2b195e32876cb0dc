#include "cpu/cpu_info.h"

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
    std::string all = " " + cpuinfo_field("flags") + " ";
    for (const char* w : wanted)
        if (all.find(std::string(" ") + w + " ") != std::string::npos) out += (out.empty() ? "" : " ") + std::string(w);
    return out.empty() ? "none" : out;
}

}  // namespace fp8scope
