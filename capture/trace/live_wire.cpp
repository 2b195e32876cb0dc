// Encoding and decoding of the live stream's frames (format in live_wire.h).
#include "live_wire.h"

#include <array>
#include <bit>
#include <cstring>
#include <type_traits>
#include <vector>

#include "record_fields.h"

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
    template <class C>  // a vector or array of numbers
    void nums(const C& v) {
        count(v.size());
        if (!v.empty()) buf_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
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
    void fill(T* out, std::size_t n) {
        need(n * sizeof(T));
        if (n) std::memcpy(out, s_.data() + pos_, n * sizeof(T));
        pos_ += n * sizeof(T);
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

// --- records, from their field lists ---------------------------------------------
// The wire order is the list order (record_fields.h, stats_fields.h): numbers and enums
// in their own width, strings and vectors as a count and their elements, nested structs
// field by field. Vectors and arrays of numbers go as one block.

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsArray : std::false_type {};
template <class T, std::size_t N>
struct IsArray<std::array<T, N>> : std::true_type {};

template <class T>
void put(Writer& w, const T& v) {
    if constexpr (std::is_enum_v<T>) {
        w.num(static_cast<std::underlying_type_t<T>>(v));
    } else if constexpr (std::is_arithmetic_v<T>) {
        w.num(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
        w.str(v);
    } else if constexpr (IsVector<T>::value || IsArray<T>::value) {
        using E = typename T::value_type;
        if constexpr (std::is_arithmetic_v<E>) {
            w.nums(v);
        } else {
            w.count(v.size());
            for (const auto& e : v) put(w, e);
        }
    } else {
        visit_fields(v, [&](std::string_view, const auto& member, const auto&...) { put(w, member); });
    }
}

// The fewest bytes an element can take: a count is checked against it before anything
// is allocated.
template <class T>
std::size_t min_bytes() {
    if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
        return sizeof(T);
    } else if constexpr (std::is_same_v<T, std::string> || IsVector<T>::value) {
        return 4;
    } else if constexpr (IsArray<T>::value) {
        return 4 + std::tuple_size_v<T> * min_bytes<typename T::value_type>();
    } else {
        static const std::size_t n = [] {
            std::size_t sum = 0;
            T t{};
            visit_fields(t, [&](std::string_view, const auto& m, const auto&...) {
                sum += min_bytes<std::remove_cvref_t<decltype(m)>>();
            });
            return sum;
        }();
        return n;
    }
}

template <class T, class... F>
void get(Reader& r, std::string_view name, T& v, const F&... facts) {
    if constexpr (std::is_enum_v<T>) {
        using U = std::underlying_type_t<T>;
        const U u = r.num<U>();
        bool bad = u > fields::last<T>(facts...);
        if constexpr (std::is_signed_v<U>) bad = bad || u < 0;
        if (bad) throw WireError(std::string(name) + ": enum value out of range");
        v = static_cast<T>(u);
    } else if constexpr (std::is_same_v<T, bool>) {
        v = r.boolean();
    } else if constexpr (std::is_arithmetic_v<T>) {
        v = r.num<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
        v = r.str();
    } else if constexpr (IsArray<T>::value) {
        using E = typename T::value_type;
        if (r.count(min_bytes<E>()) != v.size())
            throw WireError(std::string(name) + ": " + std::to_string(v.size()) + " elements expected (this build's)");
        if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) r.fill(v.data(), v.size());
        else for (auto& e : v) get(r, name, e);
    } else if constexpr (IsVector<T>::value) {
        using E = typename T::value_type;
        if constexpr (std::is_arithmetic_v<E>) {
            v = r.nums<E>();
        } else {
            v.resize(r.count(min_bytes<E>()));
            for (auto& e : v) get(r, name, e);
        }
    } else {
        visit_fields(v, [&](std::string_view field, auto& member, const auto&... f) { get(r, field, member, f...); });
    }
}

template <class T>
std::string frame_of(Msg type, const T& record) {
    Writer w(type);
    put(w, record);
    return w.finish();
}

template <class T>
T get_record(Reader& r) {
    T record;
    get(r, "", record);
    return record;
}

// The fields of a record (TraceMeta, RankStepRecord) that a frame of protocol `version`
// carries, in list order.
template <class S, class F>
void wire_fields(S& record, std::uint32_t version, F&& f) {
    visit_fields(record, [&](std::string_view name, auto& member, const auto&... facts) {
        const trace::WireSince* since = fields::find<trace::WireSince>(facts...);
        if (!since || since->version <= version) f(member, name, facts...);
    });
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
    wire_fields(m.meta, m.version, [&](const auto& member, auto&&...) { put(w, member); });
    return w.finish();
}

std::string frame(const trace::StepRecord& r, std::uint32_t version) {
    if (version >= kStepMsVersion) return frame_of(Msg::Step, r);
    trace::StepRecord older = r;
    older.step_ms = r.step_ms / 1e3;
    return frame_of(Msg::Step, older);
}
std::string frame(const trace::EventRecord& r) { return frame_of(Msg::Event, r); }
std::string frame(const trace::ScalingRecord& r) { return frame_of(Msg::Scaling, r); }
std::string frame(const trace::OperandRecord& r) { return frame_of(Msg::Operand, r); }
std::string frame(const trace::BlockMapRecord& r) { return frame_of(Msg::BlockMap, r); }
std::string frame(const trace::OpRecord& r) { return frame_of(Msg::Op, r); }
std::string frame(const trace::OpNameRecord& r) { return frame_of(Msg::OpName, r); }
std::string frame(const trace::RankStepRecord& r, std::uint32_t version) {
    Writer w(Msg::RankStep);
    wire_fields(r, version, [&](const auto& member, auto&&...) { put(w, member); });
    return w.finish();
}
std::string frame(const trace::KernelStepRecord& r) { return frame_of(Msg::KernelStep, r); }

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
        wire_fields(m.meta, m.version, [&](auto& member, std::string_view name, const auto&... facts) {
            get(r, name, member, facts...);
        });
        return m;
    });
}

trace::StepRecord decode_step(std::string_view body, std::uint32_t version) {
    trace::StepRecord r = decode(body, get_record<trace::StepRecord>);
    if (version < kStepMsVersion) r.step_ms *= 1e3;
    return r;
}
trace::EventRecord decode_event(std::string_view body) { return decode(body, get_record<trace::EventRecord>); }
trace::ScalingRecord decode_scaling(std::string_view body) { return decode(body, get_record<trace::ScalingRecord>); }
trace::OperandRecord decode_operand(std::string_view body) { return decode(body, get_record<trace::OperandRecord>); }
trace::BlockMapRecord decode_blockmap(std::string_view body) {
    return decode(body, get_record<trace::BlockMapRecord>);
}
trace::OpRecord decode_op(std::string_view body) { return decode(body, get_record<trace::OpRecord>); }
trace::RankStepRecord decode_rank_step(std::string_view body, std::uint32_t version) {
    return decode(body, [&](Reader& r) {
        trace::RankStepRecord record;
        wire_fields(record, version, [&](auto& member, std::string_view name, const auto&... facts) {
            get(r, name, member, facts...);
        });
        return record;
    });
}

trace::KernelStepRecord decode_kernel_step(std::string_view body) {
    return decode(body, get_record<trace::KernelStepRecord>);
}

trace::OpNameRecord decode_op_name(std::string_view body) {
    return decode(body, [](Reader& r) {
        auto n = get_record<trace::OpNameRecord>(r);
        if (n.id < 0) throw WireError("negative op name id");
        if (n.name.empty()) throw WireError("empty op name");
        return n;
    });
}

CommandMsg decode_command(std::string_view body) {
    return decode(body, [](Reader& r) {
        CommandMsg m;
        m.id = r.u32();
        m.command.kind = r.enum_i32<CommandKind>(static_cast<std::int32_t>(CommandKind::RecordKernels));
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
