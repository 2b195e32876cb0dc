// The memory estimate: the layout of model_layout.cpp and the trainer's buffers counted
// in double (products like B x n_head x T x T x n_layer pass 2^64 inside the limits). The
// activation count mirrors carve_activations(); tests/core/test_memory_estimate.cpp
// checks the two agree on ordinary configs.
#include "engine/memory_estimate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "engine/model_impl.h"
#include "fp8/training_recipe.h"

namespace fp8scope {
namespace {

bool is_fp8(const std::string& recipe) { return !quantizes_nothing(recipe); }

// Bytes the data source takes while it loads: the bytes read plus their int32 tokens.
double data_bytes(const DataConfig& d) {
    const std::string& s = d.source;
    if (s == "builtin") return double(d.corpus_bytes) * (1 + 4);
    std::string path = s;
    bool tokens = s.size() > 4 && s.compare(s.size() - 4, 4, ".bin") == 0;
    if (s.rfind("text:", 0) == 0) path = s.substr(5), tokens = false;
    if (s.rfind("tokens:", 0) == 0) path = s.substr(7), tokens = true;
    std::error_code ec;
    const double size = double(std::filesystem::file_size(path, ec));
    if (ec) return 0;  // the loader names the problem
    return tokens ? size + size / 2 * 4 : size * (1 + 4);
}

std::string field(const char* name, double v) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s %.0f", name, v);
    return buf;
}

}  // namespace

MemoryEstimate estimate_memory(const TrainConfig& c, std::size_t act_bytes) {
    const ModelConfig& m = c.model;
    const double B = c.batch_size, T = c.seq_len, BT = B * T, C = m.d_model, V = m.vocab_size, L = m.n_layer;
    const double NH = m.n_head, H = m.hidden(), H1 = m.mlp == MlpKind::SwiGLU ? 2 * H : H;
    const bool ln = m.norm == NormKind::LayerNorm;
    const std::vector<std::string> recipes = c.run_recipes();
    const double runs = double(recipes.size()), a = double(act_bytes);

    ParameterTensors p{};
    const double P = double(carve_params(m, nullptr, p, nullptr));  // at most ~2^48: exact in size_t
    MemoryEstimate e;
    e.params = runs * P * 4;
    e.grads = runs * P * 4;
    e.adam = runs * (2 * P * 4 + P);  // m, v and the weight-decay mask

    // carve_activations(), in the backend's dtype, then the float32 statistics and tokens.
    const double att = B * NH * T * T;
    const double dfch_act = m.mlp == MlpKind::SwiGLU ? H : 0;  // GELU's gradient lands in dfch
    const double acts = L * (BT * (8 * C + H1 + H) + att) + BT * (9 * C + V + H1 + dfch_act);
    const double stats = L * BT * (ln ? 4 : 2) + L * H + BT * (ln ? 2 : 1) + BT;
    e.activations = runs * (acts * a + stats * 4 + 2 * BT * 4);

    // An FP8 run keeps each linear's X and W cast both ways until backward, and dY of one.
    const double x_elems = BT * (3 * C + H), w_elems = 3 * C * C + C * C + H1 * C + C * H;
    const double dy_elems = BT * std::max(3 * C, H1);
    const double smooth = m.smooth_swiglu ? (BT * H + C * H) * 4 : 0;
    for (const auto& r : recipes)
        if (is_fp8(r)) e.operand_copies += 2 * a * (L * (x_elems + w_elems) + dy_elems) + smooth;

    e.data = data_bytes(c.data);
    e.eval = (double(c.eval.batches) + 1) * BT * 2 * 4;  // held-out batches and the step's batch
    e.snapshots = c.rewind.enabled ? runs * 3 * P * 4 : 0;
    e.checkpoint = c.checkpoint.dir.empty() ? 0 : runs * (3 * P * 4 + double(c.rewind.window) * 4);

    // What to lower: the fields behind the largest part.
    const std::string run_note = runs > 1 ? ", " + field("runs", runs) + " (compare)" : "";
    const std::string model = field("model.vocab_size", V) + ", " + field("model.d_model", C) + ", " +
                              field("model.n_layer", L) + ", " + field("model.d_ff", H) + ", " +
                              field("model.max_seq", m.max_seq);
    const std::string step = field("batch_size", B) + ", " + field("seq_len", T);
    e.parts = {
        {"parameters, gradients and AdamW moments", e.params + e.grads + e.adam, false, model + run_note},
        {"activations of a step", e.activations + e.operand_copies, false,
         step + ", " + field("model.n_head", NH) + " (attention keeps batch_size x n_head x seq_len^2 per layer), " +
             field("model.n_layer", L) + ", " + field("model.d_model", C) + ", " + field("model.vocab_size", V) +
             run_note},
        {"training data", e.data, true,
         c.data.source == "builtin" ? field("data.corpus_bytes", double(c.data.corpus_bytes))
                                    : "data.source " + c.data.source},
        {"evaluation batches", e.eval, true, field("eval.batches", c.eval.batches) + ", " + step},
        {"snapshots for rewind", e.snapshots, false, model + run_note},
        {"checkpoints", e.checkpoint, true, model + run_note + ", checkpoint.dir"},
    };
    return e;
}

std::string format_bytes(double bytes) {
    const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    int u = 0;
    while (bytes >= 1000 && u < 8) bytes /= 1000, ++u;
    char buf[48];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
    return buf;
}

AvailableMemory available_memory() {
    AvailableMemory have;
    std::ifstream meminfo("/proc/meminfo");
    for (std::string key; meminfo >> key;) {
        double kb = 0;
        meminfo >> kb;
        meminfo.ignore(64, '\n');
        if (key == "MemAvailable:") have = {kb * 1024, "MemAvailable in /proc/meminfo"};
    }
    if (have.source.empty()) {
        have.bytes = double(::sysconf(_SC_AVPHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
        have.source = "available pages (sysconf)";
    }
    // A container's limit is lower than what the host reports.
    if (const auto cgroup = cgroup_memory("/sys/fs/cgroup"); cgroup && cgroup->bytes < have.bytes) have = *cgroup;
    rlimit as{};
    if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && double(as.rlim_cur) < have.bytes)
        have = {double(as.rlim_cur), "the address-space limit (ulimit -v)"};
    return have;
}

std::optional<AvailableMemory> cgroup_memory(const std::filesystem::path& root) {
    constexpr double kNoLimit = 0x1p62;  // v1 writes "no limit" as 2^63 rounded down to a page
    const std::pair<const char*, const char*> files[] = {
        {"memory.max", "memory.current"}, {"memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"}};
    for (const auto& [limit_name, usage_name] : files) {
        std::ifstream limit_file(root / limit_name), usage_file(root / usage_name);
        double limit = 0, usage = 0;
        if (limit_file >> limit && usage_file >> usage && limit < kNoLimit)
            return AvailableMemory{std::max(0.0, limit - usage), std::string("the cgroup's ") + limit_name};
    }
    return std::nullopt;
}

void require_memory(const MemoryEstimate& need, const AvailableMemory& have, bool host_only, int local_ranks) {
    const double each = host_only ? need.host_bytes() : need.total(), bytes = each * local_ranks;
    if (bytes <= have.bytes) return;
    const MemoryEstimate::Part* big = nullptr;
    for (const auto& part : need.parts)
        if ((part.host || !host_only) && (!big || part.bytes > big->bytes)) big = &part;
    const std::string needs = local_ranks > 1 ? "the " + std::to_string(local_ranks) + " ranks on this machine need about " +
                                                    format_bytes(bytes) + " (" + format_bytes(each) + " each)"
                                              : "the config needs about " + format_bytes(bytes);
    std::string why = needs + " of " + (host_only ? "host " : "") + "memory, this machine has " +
                      format_bytes(have.bytes) + " available (" + have.source + ")";
    if (big)
        why += "; the largest part is the " + big->what + " (" + format_bytes(big->bytes) + "), driven by " +
               big->drivers + ": lower these fields";
    throw std::invalid_argument(why);
}

}  // namespace fp8scope
