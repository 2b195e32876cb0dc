// Frames and MessagePack payloads of the live stream (live_protocol.h).
#include "live_protocol.h"

#include <cstring>
#include <nlohmann/json.hpp>

namespace fp8scope::trace::live {
using json = nlohmann::json;

namespace {

std::vector<std::uint8_t> pack(const json& j) { return json::to_msgpack(j); }

json unpack(const std::vector<std::uint8_t>& p, const char* what) {
    try {
        json j = json::from_msgpack(p);
        if (!j.is_object()) throw ProtocolError(std::string(what) + ": payload is not a map");
        return j;
    } catch (const json::exception& e) {
        throw ProtocolError(std::string(what) + ": malformed payload (" + e.what() + ")");
    }
}

// Field access that names the field on a type mismatch.
template <class T>
T get(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end()) throw ProtocolError(std::string("missing field '") + key + "'");
    try {
        if constexpr (std::is_floating_point_v<T>) {
            if (it->is_null()) return std::numeric_limits<T>::quiet_NaN();
            if (!it->is_number()) throw ProtocolError(std::string("field '") + key + "' is not a number");
        }
        return it->template get<T>();
    } catch (const json::exception&) {
        throw ProtocolError(std::string("field '") + key + "' has the wrong type");
    }
}

json key_json(const OperandKey& k) {
    return {{"run", k.run}, {"step", k.step}, {"linear", k.linear}, {"gemm", static_cast<int>(k.gemm)},
            {"operand", static_cast<int>(k.operand)}};
}
OperandKey key_from(const json& j) {
    OperandKey k;
    k.run = get<std::int32_t>(j, "run");
    k.step = get<std::int64_t>(j, "step");
    k.linear = get<std::int32_t>(j, "linear");
    int g = get<int>(j, "gemm"), o = get<int>(j, "operand");
    if (g < 0 || g > 2 || o < 0 || o > 2) throw ProtocolError("gemm/operand out of range");
    k.gemm = static_cast<Gemm>(g);
    k.operand = static_cast<Operand>(o);
    return k;
}

json error_json(const ErrorStats& e) {
    return {{"recipe", e.recipe},         {"amax", e.amax},
            {"mse", e.mse},               {"sqnr_db", e.sqnr_db},
            {"rel_l2", e.rel_l2},         {"max_abs_err", e.max_abs_err},
            {"cosine", e.cosine},         {"underflow_pct", e.underflow_pct},
            {"overflow_pct", e.overflow_pct}, {"scale_inv_min", e.scale_inv_min},
            {"scale_inv_max", e.scale_inv_max}, {"nonfinite_out", e.nonfinite_out}};
}
ErrorStats error_from(const json& j) {
    ErrorStats e;
    e.recipe = get<std::string>(j, "recipe");
    e.amax = get<double>(j, "amax");
    e.mse = get<double>(j, "mse");
    e.sqnr_db = get<double>(j, "sqnr_db");
    e.rel_l2 = get<double>(j, "rel_l2");
    e.max_abs_err = get<double>(j, "max_abs_err");
    e.cosine = get<double>(j, "cosine");
    e.underflow_pct = get<double>(j, "underflow_pct");
    e.overflow_pct = get<double>(j, "overflow_pct");
    e.scale_inv_min = get<double>(j, "scale_inv_min");
    e.scale_inv_max = get<double>(j, "scale_inv_max");
    e.nonfinite_out = get<std::int64_t>(j, "nonfinite_out");
    return e;
}

json operand_json(const OperandRecord& r) {
    const TensorStats& s = r.stats;
    int lo = 0, hi = -1;
    for (int i = 0; i < kHistBins; ++i)
        if (s.histogram.bins[i]) {
            if (hi < 0) lo = i;
            hi = i;
        }
    std::vector<std::int64_t> bins(s.histogram.bins.begin() + lo, s.histogram.bins.begin() + hi + 1);
    json top = json::array();
    for (const auto& t : s.outliers.top) top.push_back({t.value, t.row, t.col});
    json errors = json::array();
    for (const auto& e : r.errors) errors.push_back(error_json(e));
    return {{"key", key_json(r.key)},
            {"recipe_in_use", r.recipe_in_use},
            {"scale", r.scale},
            {"numel", s.numel}, {"finite", s.finite}, {"nan", s.nan}, {"inf", s.inf}, {"zero", s.zero},
            {"amax", s.amax}, {"min_nonzero_abs", s.min_nonzero_abs}, {"mean", s.mean}, {"rms", s.rms},
            {"stddev", s.stddev}, {"dynamic_range", s.dynamic_range},
            {"hist_min_exp", lo + kHistMinExp}, {"hist", bins},
            {"hist_zero", s.histogram.zero}, {"hist_nan", s.histogram.nan}, {"hist_inf", s.histogram.inf},
            {"kurtosis", s.outliers.kurtosis}, {"outlier_k", s.outliers.k},
            {"frac_beyond_k_rms", s.outliers.frac_beyond_k_rms},
            {"channel_absmax", s.outliers.channel_absmax}, {"top", top},
            {"errors", errors}, {"amax_history", r.amax_history}};
}

OperandRecord operand_from(const json& j) {
    OperandRecord r;
    r.key = key_from(j.at("key"));
    r.recipe_in_use = get<std::int32_t>(j, "recipe_in_use");
    r.scale = get<double>(j, "scale");
    TensorStats& s = r.stats;
    s.numel = get<std::int64_t>(j, "numel");
    s.finite = get<std::int64_t>(j, "finite");
    s.nan = get<std::int64_t>(j, "nan");
    s.inf = get<std::int64_t>(j, "inf");
    s.zero = get<std::int64_t>(j, "zero");
    s.amax = get<double>(j, "amax");
    s.min_nonzero_abs = get<double>(j, "min_nonzero_abs");
    s.mean = get<double>(j, "mean");
    s.rms = get<double>(j, "rms");
    s.stddev = get<double>(j, "stddev");
    s.dynamic_range = get<double>(j, "dynamic_range");
    int min_exp = get<int>(j, "hist_min_exp");
    auto bins = get<std::vector<std::int64_t>>(j, "hist");
    if (!bins.empty() && (min_exp < kHistMinExp || min_exp - kHistMinExp + static_cast<long long>(bins.size()) > kHistBins))
        throw ProtocolError("histogram span outside the exponent range");
    for (std::size_t i = 0; i < bins.size(); ++i) s.histogram.bins[min_exp - kHistMinExp + i] = bins[i];
    s.histogram.zero = get<std::int64_t>(j, "hist_zero");
    s.histogram.nan = get<std::int64_t>(j, "hist_nan");
    s.histogram.inf = get<std::int64_t>(j, "hist_inf");
    s.outliers.kurtosis = get<double>(j, "kurtosis");
    s.outliers.k = get<double>(j, "outlier_k");
    s.outliers.frac_beyond_k_rms = get<double>(j, "frac_beyond_k_rms");
    s.outliers.channel_absmax = get<std::vector<float>>(j, "channel_absmax");
    for (const auto& t : j.at("top")) {
        if (!t.is_array() || t.size() != 3) throw ProtocolError("top value is not [value, row, col]");
        s.outliers.top.push_back({t[0].get<float>(), t[1].get<std::int64_t>(), t[2].get<std::int64_t>()});
    }
    for (const auto& e : j.at("errors")) r.errors.push_back(error_from(e));
    r.amax_history = get<std::vector<float>>(j, "amax_history");
    return r;
}

}  // namespace

std::vector<std::uint8_t> encode_frame(MsgType type, const std::vector<std::uint8_t>& payload) {
    std::uint32_t n = static_cast<std::uint32_t>(payload.size() + 1);
    if (payload.size() + 1 > kMaxFrame) throw ProtocolError("frame of " + std::to_string(payload.size()) + " bytes is too large");
    std::vector<std::uint8_t> out(5 + payload.size());
    for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
    out[4] = static_cast<std::uint8_t>(type);
    if (!payload.empty()) std::memcpy(out.data() + 5, payload.data(), payload.size());
    return out;
}

void FrameReader::feed(const void* data, std::size_t n) {
    if (pos_ > 0 && pos_ == buf_.size()) {
        buf_.clear();
        pos_ = 0;
    }
    auto* p = static_cast<const std::uint8_t*>(data);
    buf_.insert(buf_.end(), p, p + n);
}

std::optional<Frame> FrameReader::next() {
    if (buf_.size() - pos_ < 4) return std::nullopt;
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(buf_[pos_ + i]) << (8 * i);
    if (n == 0 || n > kMaxFrame)
        throw ProtocolError("frame length " + std::to_string(n) + " is outside [1, " + std::to_string(kMaxFrame) + "]");
    if (buf_.size() - pos_ < 4 + static_cast<std::size_t>(n)) return std::nullopt;
    Frame f;
    f.type = static_cast<MsgType>(buf_[pos_ + 4]);
    f.payload.assign(buf_.begin() + pos_ + 5, buf_.begin() + pos_ + 4 + n);
    pos_ += 4 + n;
    if (pos_ > (1u << 20)) {  // drop consumed bytes now and then
        buf_.erase(buf_.begin(), buf_.begin() + pos_);
        pos_ = 0;
    }
    return f;
}

const char* command_name(Command::Kind k) {
    switch (k) {
        case Command::Kind::Pause: return "pause";
        case Command::Kind::Resume: return "resume";
        case Command::Kind::Stop: return "stop";
        case Command::Kind::SwitchRecipe: return "switch_recipe";
        case Command::Kind::SetCaptureEvery: return "set_capture_every";
        case Command::Kind::CheckpointNow: return "checkpoint";
    }
    return "?";
}

std::vector<std::uint8_t> encode_meta(const TraceMeta& m) {
    json runs = json::array(), linears = json::array();
    for (const auto& r : m.runs) runs.push_back({r.name, r.recipe});
    for (const auto& l : m.linears) linears.push_back({l.name, l.layer, l.in_features, l.out_features});
    return pack({{"format_version", m.format_version}, {"tool_version", m.tool_version}, {"created", m.created},
                 {"machine", m.machine}, {"config", m.config_json}, {"runs", runs}, {"linears", linears},
                 {"recipes", m.recipes}, {"training_recipes", m.training_recipes}, {"ops", m.ops},
                 {"capture_every", m.capture_every}, {"blockmap_every", m.blockmap_every}});
}

TraceMeta decode_meta(const std::vector<std::uint8_t>& p) {
    json j = unpack(p, "meta");
    try {
        TraceMeta m;
        m.format_version = get<int>(j, "format_version");
        if (m.format_version > kFormatVersion)
            throw ProtocolError("format_version " + std::to_string(m.format_version) + " is newer than this client (" +
                                std::to_string(kFormatVersion) + ")");
        m.tool_version = get<std::string>(j, "tool_version");
        m.created = get<std::string>(j, "created");
        m.machine = get<std::string>(j, "machine");
        m.config_json = get<std::string>(j, "config");
        for (const auto& r : j.at("runs")) m.runs.push_back({r.at(0).get<std::string>(), r.at(1).get<std::string>()});
        for (const auto& l : j.at("linears"))
            m.linears.push_back({l.at(0).get<std::string>(), l.at(1).get<int>(), l.at(2).get<std::int64_t>(),
                                 l.at(3).get<std::int64_t>()});
        m.recipes = get<std::vector<std::string>>(j, "recipes");
        m.training_recipes = get<std::vector<std::string>>(j, "training_recipes");
        m.ops = get<std::vector<std::string>>(j, "ops");
        m.capture_every = get<std::int64_t>(j, "capture_every");
        m.blockmap_every = get<std::int64_t>(j, "blockmap_every");
        return m;
    } catch (const json::exception& e) {
        throw ProtocolError(std::string("meta: ") + e.what());
    }
}

std::vector<std::uint8_t> encode_record(const Record& record) {
    json j;
    if (auto* r = std::get_if<StepRecord>(&record))
        j = {{"kind", "step"}, {"run", r->run}, {"step", r->step}, {"loss", r->loss}, {"eval_loss", r->eval_loss},
             {"lr", r->lr}, {"grad_norm", r->grad_norm}, {"step_time_s", r->step_time_s},
             {"tokens_per_s", r->tokens_per_s}, {"recipe", r->recipe}};
    else if (auto* r = std::get_if<EventRecord>(&record))
        j = {{"kind", "event"}, {"run", r->run}, {"step", r->step}, {"event", static_cast<int>(r->kind)},
             {"detail", r->detail}};
    else if (auto* r = std::get_if<ScalingRecord>(&record))
        j = {{"kind", "scaling"}, {"run", r->run}, {"step", r->step}, {"amax", r->amax}, {"scale", r->scale}};
    else if (auto* r = std::get_if<OperandRecord>(&record))
        j = {{"kind", "operand"}, {"operand", operand_json(*r)}};
    else if (auto* r = std::get_if<BlockMapRecord>(&record))
        j = {{"kind", "blockmap"}, {"key", key_json(r->key)}, {"recipe", r->recipe}, {"rows", r->rows},
             {"cols", r->cols}, {"tile_rows", r->tile_rows}, {"tile_cols", r->tile_cols},
             {"grid_rows", r->grid_rows}, {"grid_cols", r->grid_cols}, {"absmax", r->absmax},
             {"scale_inv", r->scale_inv}, {"sqnr_db", r->sqnr_db}};
    else if (auto* r = std::get_if<OpRecord>(&record))
        j = {{"kind", "op"}, {"run", r->run}, {"step", r->step}, {"op", r->op}, {"linear", r->linear},
             {"layer", r->layer}, {"device", r->device}, {"stream", r->stream}, {"start_ns", r->start_ns},
             {"end_ns", r->end_ns}};
    else if (auto* r = std::get_if<OpNameRecord>(&record))
        j = {{"kind", "op_name"}, {"id", r->id}, {"name", r->name}};
    return pack(j);
}

Record decode_record(const std::vector<std::uint8_t>& p) {
    json j = unpack(p, "record");
    try {
        std::string kind = get<std::string>(j, "kind");
        if (kind == "step")
            return StepRecord{get<std::int32_t>(j, "run"), get<std::int64_t>(j, "step"), get<double>(j, "loss"),
                              get<double>(j, "eval_loss"), get<double>(j, "lr"), get<double>(j, "grad_norm"),
                              get<double>(j, "step_time_s"), get<double>(j, "tokens_per_s"),
                              get<std::int32_t>(j, "recipe")};
        if (kind == "event") {
            int k = get<int>(j, "event");
            if (k < 0 || k > static_cast<int>(EventKind::Error)) throw ProtocolError("unknown event kind " + std::to_string(k));
            return EventRecord{get<std::int32_t>(j, "run"), get<std::int64_t>(j, "step"), static_cast<EventKind>(k),
                               get<std::string>(j, "detail")};
        }
        if (kind == "scaling")
            return ScalingRecord{get<std::int32_t>(j, "run"), get<std::int64_t>(j, "step"),
                                 get<std::vector<float>>(j, "amax"), get<std::vector<float>>(j, "scale")};
        if (kind == "operand") return operand_from(j.at("operand"));
        if (kind == "blockmap") {
            BlockMapRecord b;
            b.key = key_from(j.at("key"));
            b.recipe = get<std::int32_t>(j, "recipe");
            b.rows = get<std::int64_t>(j, "rows");
            b.cols = get<std::int64_t>(j, "cols");
            b.tile_rows = get<std::int32_t>(j, "tile_rows");
            b.tile_cols = get<std::int32_t>(j, "tile_cols");
            b.grid_rows = get<std::int32_t>(j, "grid_rows");
            b.grid_cols = get<std::int32_t>(j, "grid_cols");
            b.absmax = get<std::vector<float>>(j, "absmax");
            b.scale_inv = get<std::vector<float>>(j, "scale_inv");
            b.sqnr_db = get<std::vector<float>>(j, "sqnr_db");
            return b;
        }
        if (kind == "op")
            return OpRecord{get<std::int32_t>(j, "run"),    get<std::int64_t>(j, "step"),
                            get<std::int32_t>(j, "op"),     get<std::int32_t>(j, "linear"),
                            get<std::int32_t>(j, "layer"),  get<std::int32_t>(j, "device"),
                            get<std::int32_t>(j, "stream"), get<std::int64_t>(j, "start_ns"),
                            get<std::int64_t>(j, "end_ns")};
        if (kind == "op_name") return OpNameRecord{get<std::int32_t>(j, "id"), get<std::string>(j, "name")};
        throw ProtocolError("unknown record kind '" + kind + "'");
    } catch (const json::exception& e) {
        throw ProtocolError(std::string("record: ") + e.what());
    }
}

std::vector<std::uint8_t> encode_command(const Command& c) {
    return pack({{"cmd", command_name(c.kind)}, {"run", c.run}, {"recipe", c.recipe}, {"every", c.every},
                 {"path", c.path}});
}

Command decode_command(const std::vector<std::uint8_t>& p) {
    json j = unpack(p, "command");
    std::string name = get<std::string>(j, "cmd");
    Command c;
    bool found = false;
    for (auto k : {Command::Kind::Pause, Command::Kind::Resume, Command::Kind::Stop, Command::Kind::SwitchRecipe,
                   Command::Kind::SetCaptureEvery, Command::Kind::CheckpointNow})
        if (name == command_name(k)) c.kind = k, found = true;
    if (!found) throw ProtocolError("unknown command '" + name + "'");
    if (c.kind == Command::Kind::SwitchRecipe) {
        c.run = get<std::int32_t>(j, "run");
        c.recipe = get<std::string>(j, "recipe");
    }
    if (c.kind == Command::Kind::SetCaptureEvery) {
        c.every = get<std::int64_t>(j, "every");
        if (c.every < 0 || c.every > (1 << 30)) throw ProtocolError("every = " + std::to_string(c.every) + " is out of range");
    }
    if (c.kind == Command::Kind::CheckpointNow && j.contains("path")) c.path = get<std::string>(j, "path");
    return c;
}

std::vector<std::uint8_t> encode_reply(const Reply& r) { return pack({{"ok", r.ok}, {"error", r.error}}); }
Reply decode_reply(const std::vector<std::uint8_t>& p) {
    json j = unpack(p, "reply");
    return Reply{get<bool>(j, "ok"), get<std::string>(j, "error")};
}

std::vector<std::uint8_t> encode_auth(const std::string& token) { return pack({{"token", token}}); }
std::string decode_auth(const std::vector<std::uint8_t>& p) { return get<std::string>(unpack(p, "auth"), "token"); }

}  // namespace fp8scope::trace::live
