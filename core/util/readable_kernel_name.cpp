#include "util/readable_kernel_name.h"

#include <array>
#include <cctype>
#include <regex>
#include <vector>

namespace fp8scope {

namespace {

// nvjet's one-letter type codes.
const char* nvjet_type(char c) {
    switch (c) {
        case 'h': return "f16";
        case 's': return "f32";
        case 't': return "bf16";
        case 'd': return "f64";
        case 'q': return "e4m3";
        case 'r': return "e5m2";
        case 'i': return "int8";
        default: return nullptr;
    }
}

std::string nvjet_name(const std::string& s) {
    static const std::regex form(R"(^nvjet_sm\d+_([a-z]{3}|[a-z]{5})_(\d+)x(\d+)_(\d+)x\d+_.*)");
    std::smatch m;
    if (!std::regex_match(s, m, form)) return {};
    const std::string t = m[1];
    const char *a = nvjet_type(t[0]), *b = nvjet_type(t.size() == 5 ? t[1] : t[0]), *d = nvjet_type(t.back());
    if (!a || !b || !d) return {};
    std::string out = std::string("cuBLASLt GEMM ") + a + " x " + b + " -> " + d + " " + std::string(m[2]) + "x" +
                      std::string(m[3]) + "x" + std::string(m[4]);
    if (s.find("_Ablk") != std::string::npos) out += " block scales";
    else if (s.find("_Avec") != std::string::npos) out += " 1x128 scales";
    if (s.find("gelu") != std::string::npos) out += " +gelu";
    if (s.find("bias") != std::string::npos) out += " +bias";
    return out;
}

// Element type names as CUTLASS and cuBLAS's xmma kernels write them.
constexpr std::array<std::string_view, 12> kTypes = {"e4m3", "e5m2", "bf16", "tf32", "f16", "f32", "f64",
                                                     "s8",   "u8",   "s32",  "i8",   "i32"};

// "e4m3e4m3" -> {"e4m3", "e4m3"}; empty when some part is no type.
std::vector<std::string> split_types(std::string_view joined) {
    std::vector<std::string> out;
    while (!joined.empty()) {
        bool found = false;
        for (std::string_view t : kTypes)
            if (joined.starts_with(t)) {
                out.emplace_back(t);
                joined.remove_prefix(t.size());
                found = true;
                break;
            }
        if (!found) return {};
    }
    return out;
}

std::string gemm_label(const std::string& library, const std::string& a, const std::string& b, const std::string& d,
                       const std::string& tile) {
    std::string out = library + " GEMM";
    if (!a.empty()) out += " " + a + " x " + b + " -> " + d;
    if (!tile.empty()) out += " " + tile;
    return out;
}

std::string first_tile(const std::string& s) {
    static const std::regex mnk(R"((\d+)x(\d+)x(\d+))"), mn_k(R"((\d+)x(\d+)_(\d+)x\d+)");
    std::smatch m;
    if (std::regex_search(s, m, mnk)) return std::string(m[1]) + "x" + std::string(m[2]) + "x" + std::string(m[3]);
    if (std::regex_search(s, m, mn_k)) return std::string(m[1]) + "x" + std::string(m[2]) + "x" + std::string(m[3]);
    return {};
}

// "sm90_xmma_gemm_e4m3e4m3_bf16_f32_tn_n_tilesize128x128x128_...": A and B, D, accumulator.
std::string xmma_name(const std::string& s) {
    static const std::regex form(R"(^sm\d+_xmma_gemm_([a-z0-9]+)_([a-z0-9]+)_([a-z0-9]+)_.*)");
    std::smatch m;
    if (!std::regex_match(s, m, form)) return {};
    const auto ab = split_types(m[1].str()), d = split_types(m[2].str());
    std::string tile;
    static const std::regex size(R"(tilesize(\d+x\d+x\d+))");
    if (std::smatch t; std::regex_search(s, t, size)) tile = t[1];
    if (ab.size() != 2 || d.empty()) return gemm_label("cuBLASLt", "", "", "", tile);
    return gemm_label("cuBLASLt", ab[0], ab[1], d[0], tile);
}

// CUTLASS 3's "cutlass3x_sm90_tensorop_gemm_<A>_<B>_<acc>_<C>_<D>_<MxNxK>_..." and the
// older "cutlass_80_tensorop_bf16_s16816gemm_bf16_64x64_32x6_tn_align8" (tile only).
std::string cutlass_name(const std::string& s) {
    static const std::regex v3(R"(gemm_([a-z0-9]+)_([a-z0-9]+)_([a-z0-9]+)_([a-z0-9]+)_([a-z0-9]+)_\d+x\d+x\d+)");
    std::smatch m;
    if (std::regex_search(s, m, v3)) {
        const auto a = split_types(m[1].str()), b = split_types(m[2].str()), d = split_types(m[5].str());
        if (a.size() == 1 && b.size() == 1 && d.size() == 1) return gemm_label("CUTLASS", a[0], b[0], d[0], first_tile(s));
    }
    return gemm_label("CUTLASS", "", "", "", first_tile(s));
}

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Drops "ns::" and "(anonymous namespace)::" qualifiers everywhere.
std::string drop_qualifiers(const std::string& s) {
    static const std::regex qualifier(R"((\(anonymous namespace\)|[A-Za-z_][A-Za-z0-9_]*)::)");
    return std::regex_replace(s, qualifier, "");
}

std::string trim(std::string s) {
    const auto b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string short_argument(std::string a) {
    a = trim(a);
    static const std::regex enum_value(R"(^\((\w+)\)(-?\d+)$)");
    std::smatch m;
    if (std::regex_match(a, m, enum_value)) {
        const std::string type = m[1];
        const int v = std::stoi(m[2]);
        if (type == "Format") return v == 0 ? "e4m3" : v == 1 ? "e5m2" : a;
        if (type == "BlockShape") {
            static const char* shapes[] = {"per-tensor", "1x128", "128x128", "mx32"};
            return v >= 0 && v < 4 ? shapes[v] : a;
        }
        return a;
    }
    if (a == "unsigned short" || a == "__nv_bfloat16") return "bf16";
    if (a == "float") return "f32";
    if (a == "double") return "f64";
    if (a == "__half") return "f16";
    if (const auto lt = a.find('<'); lt != std::string::npos) a.resize(lt);  // nested template: its name
    if (a.size() > 2 && a.ends_with("Op") && is_ident(a[a.size() - 3])) a.resize(a.size() - 2);
    return trim(a);
}

std::string template_name(const std::string& full) {
    const std::string s = drop_qualifiers(full);
    const auto lt = s.find('<');
    std::string fn = s.substr(0, lt);
    if (fn.size() > 7 && fn.ends_with("_kernel")) fn.resize(fn.size() - 7);
    if (lt == std::string::npos) return fn;
    // The top-level arguments; a name cut short (brackets unbalanced) keeps none.
    std::vector<std::string> args;
    std::string cur;
    int depth = 0;
    bool closed = false;
    for (std::size_t i = lt + 1; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '<' || c == '(') ++depth;
        if (c == '>' || c == ')') --depth;
        if (depth < 0) {
            args.push_back(cur);
            closed = true;
            break;
        }
        if (c == ',' && depth == 0) {
            args.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!closed) return fn;
    std::string out = fn + "<";
    for (std::size_t i = 0; i < args.size(); ++i) out += (i ? ", " : "") + short_argument(args[i]);
    return out + ">";
}

}  // namespace

std::string readable_kernel_name(std::string_view full) {
    const std::string s(full);
    if (s.starts_with("nvjet_"))
        if (std::string n = nvjet_name(s); !n.empty()) return n;
    if (s.find("_xmma_gemm_") != std::string::npos)
        if (std::string n = xmma_name(s); !n.empty()) return n;
    if (s.find("cutlass") != std::string::npos && s.find("gemm") != std::string::npos) return cutlass_name(s);
    if (s.find("::") != std::string::npos || s.find('<') != std::string::npos) return template_name(s);
    return s;
}

}  // namespace fp8scope
