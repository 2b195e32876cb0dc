// Saving and restoring the delayed-scaling state of the linear layers (for checkpoints).
// Layout, in the machine's byte order (little-endian on x86-64 and aarch64):
//   "F8RS" u32 version=1, u32 linears, u32 recipes, then per recipe:
//   u32 name length, name bytes, then per linear and operand (x, w, dy):
//   u8 present; if present: u8 format, i32 history length limit, u8 algo, i32 margin,
//   f32 scale, u32 n, f32 history[n] (oldest first).
#include <cstring>
#include <stdexcept>

#include "engine/fp8_linear.h"

namespace fp8scope {
namespace {

constexpr char kMagic[4] = {'F', '8', 'R', 'S'};
constexpr std::uint32_t kVersion = 1;

template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
    std::size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

struct Reader {
    const std::vector<std::uint8_t>& bytes;
    std::size_t pos = 0;
    template <class T>
    T get() {
        if (bytes.size() - pos < sizeof(T)) throw std::runtime_error("recipe state: truncated");
        T v;
        std::memcpy(&v, bytes.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
};

}  // namespace

std::vector<std::uint8_t> Fp8Linear::save_state() const {
    std::vector<std::uint8_t> out(kMagic, kMagic + 4);
    put<std::uint32_t>(out, kVersion);
    put<std::uint32_t>(out, std::uint32_t(linears_.size()));
    put<std::uint32_t>(out, std::uint32_t(delayed_.size()));
    for (const auto& [name, per_linear] : delayed_) {
        put<std::uint32_t>(out, std::uint32_t(name.size()));
        out.insert(out.end(), name.begin(), name.end());
        for (const Histories& histories : per_linear)
            for (const auto& h : histories) {
                put<std::uint8_t>(out, h ? 1 : 0);
                if (!h) continue;
                const DelayedState state = h->read();
                const DelayedState* s = &state;
                const DelayedScaling& r = s->recipe();
                put<std::uint8_t>(out, std::uint8_t(r.format));
                put<std::int32_t>(out, r.history);
                put<std::uint8_t>(out, std::uint8_t(r.algo));
                put<std::int32_t>(out, r.margin);
                put<float>(out, s->scale());
                put<std::uint32_t>(out, std::uint32_t(s->history().size()));
                for (float a : s->history()) put<float>(out, a);
            }
    }
    return out;
}

void Fp8Linear::load_state(const std::vector<std::uint8_t>& bytes) {
    Reader in{bytes};
    if (bytes.size() < 4 || std::memcmp(bytes.data(), kMagic, 4) != 0)
        throw std::runtime_error("recipe state: not a recipe state (bad magic)");
    in.pos = 4;
    if (auto v = in.get<std::uint32_t>(); v != kVersion)
        throw std::runtime_error("recipe state: unsupported version " + std::to_string(v));
    if (auto n = in.get<std::uint32_t>(); n != linears_.size())
        throw std::runtime_error("recipe state: saved for " + std::to_string(n) + " linear layers, model has " +
                                 std::to_string(linears_.size()));
    std::map<std::string, std::vector<Histories>> loaded;
    std::uint32_t recipes = in.get<std::uint32_t>();
    for (std::uint32_t i = 0; i < recipes; ++i) {
        std::uint32_t len = in.get<std::uint32_t>();
        if (bytes.size() - in.pos < len) throw std::runtime_error("recipe state: truncated");
        std::string name(bytes.begin() + std::ptrdiff_t(in.pos), bytes.begin() + std::ptrdiff_t(in.pos + len));
        in.pos += len;
        auto& per_linear = loaded[name];
        per_linear.resize(linears_.size());
        for (Histories& histories : per_linear)
            for (auto& h : histories) {
                if (!in.get<std::uint8_t>()) continue;
                DelayedScaling r;
                auto format = in.get<std::uint8_t>();
                r.history = in.get<std::int32_t>();
                auto algo = in.get<std::uint8_t>();
                r.margin = in.get<std::int32_t>();
                if (format > 1 || algo > 1 || r.history < 1) throw std::runtime_error("recipe state: corrupt entry");
                r.format = Format(format);
                r.algo = AmaxAlgo(algo);
                float scale = in.get<float>();
                const std::uint32_t n = in.get<std::uint32_t>();
                // Sized only once the bytes are there: a damaged count must not allocate.
                if ((bytes.size() - in.pos) / sizeof(float) < n) throw std::runtime_error("recipe state: truncated");
                std::deque<float> history(n);
                for (float& a : history) a = in.get<float>();
                DelayedState state(r);
                state.restore(std::move(history), scale);
                h = backend_.make_amax_history(r);
                h->restore(state);
            }
    }
    if (in.pos != bytes.size()) throw std::runtime_error("recipe state: trailing bytes");
    delayed_ = std::move(loaded);
    set_plan(plan_);  // the current recipes get their (restored or fresh) states
}

}  // namespace fp8scope
