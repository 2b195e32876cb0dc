// Encoding and decoding of the live stream's frames (format in live_wire.h).
#include "live_wire.h"

#include <bit>
#include <cstring>
#include <type_traits>

namespace fp8scope::live::wire {
namespace {

// Values are copied in host order, which the format fixes as little-endian.
static_assert(std::endian::native == std::endian::little, "the live wire format assumes a little-endian host");

class Writer {
public:
    explicit Writer(Msg type) { buf_.assign(kHeader, '\0'); buf_[4] = static_cast<char>(type); }

    template <class T>
    void num(T v) {
        static_assert(std::is_arithmetic_v<T>);
        char b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));
        buf_.append(b, sizeof(T));
    }
    void u8(std::uint8_t v) { num(v); }
    void u32(std::uint32_t v) { num(v); }
    void i32(std::int32_t v) { num(v); }
    void i64(std::int64_t v) { num(v); }
    void f64(double v) { num(v); }
    void count(std::size_t n) { u32(static_cast<std::uint32_t>(n)); }
    void str(std::string_view s) {
        count(s.size());
        buf_.append(s);
    }
    void raw(std::string_view s) { buf_.append(s); }
    template <class T>
    void nums(const std::vector<T>& v) {
        count(v.size());
        if (!v.empty()) buf_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    }

    std::string finish() {
        const auto len = static_cast<std::uint32_t>(buf_.size() - 4);
        std::memcpy(buf_.data(), &len, 4);
        return std::move(buf_);
    }

private:
    std::string buf_;
};

class Reader {
public:
    explicit Reader(std::string_view body) : s_(body) {}

    template <class T>
    T num() {
        need(sizeof(T));
        T v;
        std::memcpy(&v, s_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::uint8_t u8() { return num<std::uint8_t>(); }
    std::uint32_t u32() { return num<std::uint32_t>(); }
    std::int32_t i32() { return num<std::int32_t>(); }
    std::int64_t i64() { return num<std::int64_t>(); }
    double f64() { return num<double>(); }
    bool boolean() {
        std::uint8_t v = u8();
        if (v > 1) throw WireError("bool out of range");
        return v == 1;
    }
    // A count of elements that each take at least `min_bytes`: checked before allocating.
    std::size_t count(std::size_t min_bytes) {
        std::size_t n = u32();
        if (min_bytes > 0 && n > left() / min_bytes) throw WireError("count past the end of the frame");
        return n;
    }
    std::string str() {
        std::size_t n = count(1);
        std::string out(s_.substr(pos_, n));
        pos_ += n;
        return out;
    }
    void magic() {
        need(kMagic.size());
        if (s_.substr(pos_, kMagic.size()) != kMagic) throw WireError("not an fp8scope frame (no magic)");
        pos_ += kMagic.size();
    }
    template <class T>
    std::vector<T> nums() {
        std::size_t n = count(sizeof(T));
        std::vector<T> v(n);
        if (n) std::memcpy(v.data(), s_.data() + pos_, n * sizeof(T));
        pos_ += n * sizeof(T);
        return v;
    }
    template <class E>
    E enum_i32(std::int32_t max) {
        std::int32_t v = i32();
        if (v < 0 || v > max) throw WireError("enum value out of range");
        return static_cast<E>(v);
    }
    template <class E>
    E enum_u8(std::uint8_t max) {
        std::uint8_t v = u8();
        if (v > max) throw WireError("enum value out of range");
        return static_cast<E>(v);
    }
    void done() const {
        if (pos_ != s_.size()) throw WireError("trailing bytes after the message");
    }

private:
    std::size_t left() const { return s_.size() - pos_; }
    void need(std::size_t n) const {
        if (n > left()) throw WireError("truncated message");
    }
    std::string_view s_;
    std::size_t pos_ = 0;
};

// --- records, field by field ------------------------------------------------------

void put(Writer& w, const trace::OperandKey& k) {
    w.i32(k.run);
    w.i64(k.step);
    w.i32(k.linear);
    w.u8(static_cast<std::uint8_t>(k.gemm));
    w.u8(static_cast<std::uint8_t>(k.operand));
}
trace::OperandKey get_key(Reader& r) {
    trace::OperandKey k;
    k.run = r.i32();
    k.step = r.i64();
    k.linear = r.i32();
    k.gemm = r.enum_u8<Gemm>(static_cast<std::uint8_t>(Gemm::Wgrad));
    k.operand = r.enum_u8<Operand>(static_cast<std::uint8_t>(Operand::DY));
    return k;
}

void put(Writer& w, const TensorStats& s) {
    w.i64(s.numel);
    w.i64(s.finite);
    w.i64(s.nan);
    w.i64(s.inf);
    w.i64(s.zero);
    w.f64(s.amax);
    w.f64(s.min_nonzero_abs);
    w.f64(s.mean);
    w.f64(s.rms);
    w.f64(s.stddev);
    w.f64(s.dynamic_range);
    w.count(s.histogram.bins.size());
    for (auto b : s.histogram.bins) w.i64(b);
    w.i64(s.histogram.zero);
    w.i64(s.histogram.nan);
    w.i64(s.histogram.inf);
    const auto& o = s.outliers;
    w.f64(o.kurtosis);
    w.f64(o.k);
    w.f64(o.frac_beyond_k_rms);
    w.nums(o.channel_absmax);
    w.count(o.top.size());
    for (const auto& t : o.top) {
        w.num(t.value);
        w.i64(t.row);
        w.i64(t.col);
    }
}
TensorStats get_stats(Reader& r) {
    TensorStats s;
    s.numel = r.i64();
    s.finite = r.i64();
    s.nan = r.i64();
    s.inf = r.i64();
    s.zero = r.i64();
    s.amax = r.f64();
    s.min_nonzero_abs = r.f64();
    s.mean = r.f64();
    s.rms = r.f64();
    s.stddev = r.f64();
    s.dynamic_range = r.f64();
    if (r.count(8) != s.histogram.bins.size()) throw WireError("histogram bin count differs from this build's");
    for (auto& b : s.histogram.bins) b = r.i64();
    s.histogram.zero = r.i64();
    s.histogram.nan = r.i64();
    s.histogram.inf = r.i64();
    auto& o = s.outliers;
    o.kurtosis = r.f64();
    o.k = r.f64();
    o.frac_beyond_k_rms = r.f64();
    o.channel_absmax = r.nums<float>();
    o.top.resize(r.count(4 + 8 + 8));
    for (auto& t : o.top) {
        t.value = r.num<float>();
        t.row = r.i64();
        t.col = r.i64();
    }
    return s;
}

void put(Writer& w, const ErrorStats& e) {
    w.str(e.recipe);
    for (double v : {e.amax, e.mse, e.sqnr_db, e.rel_l2, e.max_abs_err, e.cosine, e.underflow_pct, e.overflow_pct,
                     e.scale_inv_min, e.scale_inv_max})
        w.f64(v);
    w.i64(e.nonfinite_out);
}
ErrorStats get_error(Reader& r) {
    ErrorStats e;
    e.recipe = r.str();
    for (double* v : {&e.amax, &e.mse, &e.sqnr_db, &e.rel_l2, &e.max_abs_err, &e.cosine, &e.underflow_pct,
                      &e.overflow_pct, &e.scale_inv_min, &e.scale_inv_max})
        *v = r.f64();
    e.nonfinite_out = r.i64();
    return e;
}

void put_strings(Writer& w, const std::vector<std::string>& v) {
    w.count(v.size());
    for (const auto& s : v) w.str(s);
}
std::vector<std::string> get_strings(Reader& r) {
    std::vector<std::string> v(r.count(4));
    for (auto& s : v) s = r.str();
    return v;
}

void put(Writer& w, const trace::TraceMeta& m) {
    w.i32(m.format_version);
    w.str(m.tool_version);
    w.str(m.created);
    w.str(m.machine);
    w.str(m.config_json);
    w.count(m.runs.size());
    for (const auto& run : m.runs) {
        w.str(run.name);
        w.str(run.recipe);
    }
    w.count(m.linears.size());
    for (const auto& l : m.linears) {
        w.str(l.name);
        w.i32(l.layer);
        w.i64(l.in_features);
        w.i64(l.out_features);
    }
    put_strings(w, m.recipes);
    put_strings(w, m.training_recipes);
    put_strings(w, m.ops);
    w.i64(m.capture_every);
    w.i64(m.blockmap_every);
}
trace::TraceMeta get_meta(Reader& r) {
    trace::TraceMeta m;
    m.format_version = r.i32();
    m.tool_version = r.str();
    m.created = r.str();
    m.machine = r.str();
    m.config_json = r.str();
    m.runs.resize(r.count(8));
    for (auto& run : m.runs) {
        run.name = r.str();
        run.recipe = r.str();
    }
    m.linears.resize(r.count(4 + 4 + 8 + 8));
    for (auto& l : m.linears) {
        l.name = r.str();
        l.layer = r.i32();
        l.in_features = r.i64();
        l.out_features = r.i64();
    }
    m.recipes = get_strings(r);
    m.training_recipes = get_strings(r);
    m.ops = get_strings(r);
    m.capture_every = r.i64();
    m.blockmap_every = r.i64();
    return m;
}

template <class F>
auto decode(std::string_view body, F&& f) {
    Reader r(body);
    auto out = f(r);
    r.done();
    return out;
}

}  // namespace

// --- frames -----------------------------------------------------------------------

std::string frame(const Hello& m) {
    Writer w(Msg::Hello);
    w.raw(kMagic);
    w.u32(m.version);
    w.str(m.token);
    return w.finish();
}

std::string frame(const MetaMsg& m) {
    Writer w(Msg::Meta);
    w.raw(kMagic);
    w.u32(m.version);
    put(w, m.meta);
    return w.finish();
}

std::string frame(const trace::StepRecord& r) {
    Writer w(Msg::Step);
    w.i32(r.run);
    w.i64(r.step);
    for (double v : {r.loss, r.eval_loss, r.lr, r.grad_norm, r.step_time_s, r.tokens_per_s}) w.f64(v);
    w.i32(r.recipe);
    return w.finish();
}

std::string frame(const trace::EventRecord& r) {
    Writer w(Msg::Event);
    w.i32(r.run);
    w.i64(r.step);
    w.i32(static_cast<std::int32_t>(r.kind));
    w.str(r.detail);
    return w.finish();
}

std::string frame(const trace::ScalingRecord& r) {
    Writer w(Msg::Scaling);
    w.i32(r.run);
    w.i64(r.step);
    w.nums(r.amax);
    w.nums(r.scale);
    return w.finish();
}

std::string frame(const trace::OperandRecord& r) {
    Writer w(Msg::Operand);
    put(w, r.key);
    w.i32(r.recipe_in_use);
    w.f64(r.scale);
    put(w, r.stats);
    w.count(r.errors.size());
    for (const auto& e : r.errors) put(w, e);
    w.nums(r.amax_history);
    return w.finish();
}

std::string frame(const trace::BlockMapRecord& r) {
    Writer w(Msg::BlockMap);
    put(w, r.key);
    w.i32(r.recipe);
    w.i64(r.rows);
    w.i64(r.cols);
    w.i32(r.tile_rows);
    w.i32(r.tile_cols);
    w.i32(r.grid_rows);
    w.i32(r.grid_cols);
    w.nums(r.absmax);
    w.nums(r.scale_inv);
    w.nums(r.sqnr_db);
    return w.finish();
}

std::string frame(const trace::OpRecord& r) {
    Writer w(Msg::Op);
    w.i32(r.run);
    w.i64(r.step);
    for (std::int32_t v : {r.op, r.linear, r.layer, r.device, r.stream}) w.i32(v);
    w.i64(r.start_ns);
    w.i64(r.end_ns);
    return w.finish();
}

std::string frame(const trace::OpNameRecord& r) {
    Writer w(Msg::OpName);
    w.i32(r.id);
    w.str(r.name);
    return w.finish();
}

std::string frame(const CommandMsg& m) {
    Writer w(Msg::Command);
    w.u32(m.id);
    w.i32(static_cast<std::int32_t>(m.command.kind));
    w.i32(m.command.run);
    w.str(m.command.recipe);
    w.i64(m.command.value);
    return w.finish();
}

std::string frame(const ReplyMsg& m) {
    Writer w(Msg::Reply);
    w.u32(m.id);
    w.u8(m.reply.ok ? 1 : 0);
    w.str(m.reply.error);
    return w.finish();
}

std::string frame(const ErrorMsg& m) {
    Writer w(Msg::Error);
    w.u32(static_cast<std::uint32_t>(m.code));
    w.str(m.message);
    return w.finish();
}

// --- decoders ---------------------------------------------------------------------

Hello decode_hello(std::string_view body) {
    return decode(body, [](Reader& r) {
        r.magic();
        Hello m;
        m.version = r.u32();
        m.token = r.str();
        return m;
    });
}

MetaMsg decode_meta(std::string_view body) {
    return decode(body, [](Reader& r) {
        r.magic();
        MetaMsg m;
        m.version = r.u32();
        m.meta = get_meta(r);
        return m;
    });
}

trace::StepRecord decode_step(std::string_view body) {
    return decode(body, [](Reader& r) {
        trace::StepRecord s;
        s.run = r.i32();
        s.step = r.i64();
        for (double* v : {&s.loss, &s.eval_loss, &s.lr, &s.grad_norm, &s.step_time_s, &s.tokens_per_s}) *v = r.f64();
        s.recipe = r.i32();
        return s;
    });
}

trace::EventRecord decode_event(std::string_view body) {
    return decode(body, [](Reader& r) {
        trace::EventRecord e;
        e.run = r.i32();
        e.step = r.i64();
        e.kind = r.enum_i32<trace::EventKind>(static_cast<std::int32_t>(trace::EventKind::End));
        e.detail = r.str();
        return e;
    });
}

trace::ScalingRecord decode_scaling(std::string_view body) {
    return decode(body, [](Reader& r) {
        trace::ScalingRecord s;
        s.run = r.i32();
        s.step = r.i64();
        s.amax = r.nums<float>();
        s.scale = r.nums<float>();
        return s;
    });
}

trace::OperandRecord decode_operand(std::string_view body) {
    return decode(body, [](Reader& r) {
        trace::OperandRecord o;
        o.key = get_key(r);
        o.recipe_in_use = r.i32();
        o.scale = r.f64();
        o.stats = get_stats(r);
        o.errors.resize(r.count(4 + 10 * 8 + 8));
        for (auto& e : o.errors) e = get_error(r);
        o.amax_history = r.nums<float>();
        return o;
    });
}

trace::BlockMapRecord decode_blockmap(std::string_view body) {
    return decode(body, [](Reader& r) {
        trace::BlockMapRecord b;
        b.key = get_key(r);
        b.recipe = r.i32();
        b.rows = r.i64();
        b.cols = r.i64();
        b.tile_rows = r.i32();
        b.tile_cols = r.i32();
        b.grid_rows = r.i32();
        b.grid_cols = r.i32();
        b.absmax = r.nums<float>();
        b.scale_inv = r.nums<float>();
        b.sqnr_db = r.nums<float>();
        return b;
    });
}

trace::OpRecord decode_op(std::string_view body) {
    return decode(body, [](Reader& r) {
        trace::OpRecord o;
        o.run = r.i32();
        o.step = r.i64();
        o.op = r.i32();
        o.linear = r.i32();
        o.layer = r.i32();
        o.device = r.i32();
        o.stream = r.i32();
        o.start_ns = r.i64();
        o.end_ns = r.i64();
        return o;
    });
}

trace::OpNameRecord decode_op_name(std::string_view body) {
    return decode(body, [](Reader& r) {
        trace::OpNameRecord n;
        n.id = r.i32();
        if (n.id < 0) throw WireError("negative op name id");
        n.name = r.str();
        if (n.name.empty()) throw WireError("empty op name");
        return n;
    });
}

CommandMsg decode_command(std::string_view body) {
    return decode(body, [](Reader& r) {
        CommandMsg m;
        m.id = r.u32();
        m.command.kind = r.enum_i32<CommandKind>(static_cast<std::int32_t>(CommandKind::Checkpoint));
        m.command.run = r.i32();
        m.command.recipe = r.str();
        m.command.value = r.i64();
        return m;
    });
}

ReplyMsg decode_reply(std::string_view body) {
    return decode(body, [](Reader& r) {
        ReplyMsg m;
        m.id = r.u32();
        m.reply.ok = r.boolean();
        m.reply.error = r.str();
        return m;
    });
}

ErrorMsg decode_error(std::string_view body) {
    return decode(body, [](Reader& r) {
        ErrorMsg m;
        m.code = static_cast<ErrorCode>(r.u32());
        m.message = r.str();
        return m;
    });
}

Split split_frame(std::string_view buffer, FrameView& out, std::size_t& consumed) {
    if (buffer.size() < 4) return Split::NeedMore;
    std::uint32_t len;
    std::memcpy(&len, buffer.data(), 4);
    if (len > kMaxFrame) return Split::TooLarge;
    if (len == 0) return Split::Empty;
    if (buffer.size() < 4 + static_cast<std::size_t>(len)) return Split::NeedMore;
    out.type = static_cast<Msg>(static_cast<std::uint8_t>(buffer[4]));
    out.body = buffer.substr(kHeader, len - 1);
    consumed = 4 + static_cast<std::size_t>(len);
    return Split::Frame;
}

}  // namespace fp8scope::live::wire
