// HDF5 compound types and rows from field lists (core/util/field_list.h). A table's
// columns are a list too (trace_schema.h): the scalar fields of the records it holds and
// its own (offset, count) columns. The compound type (member names, order and types) and
// the record <-> row copies both walk that list with the same cursor, so they cannot
// disagree. Put and Get know every offset at compile time once inlined: a row copy is a
// sequence of direct stores, with no names looked up. Packed rows (the trace tables) are
// byte for byte the file's type, so HDF5 copies them without converting; aligned rows lay
// members out as a C struct does (the analysis report's types).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "h5.h"
#include "util/field_list.h"

namespace fp8scope::h5 {

enum class Packing { Packed, Aligned };

// How a field is stored in a column: numbers as they are, enums as the signed integer of
// their width (format 1 has gemm int8 and kind int32), strings NUL-padded in their
// MaxChars width. Any other field (a string without a width) has no column.
template <class T, class... F>
struct Storage {
    static constexpr bool column = false;
};
template <class T, class... F>
    requires std::is_arithmetic_v<T>
struct Storage<T, F...> {
    static constexpr bool column = true;
    using type = T;
    static constexpr std::size_t size = sizeof(T), align = alignof(T);
};
template <class T, class... F>
    requires std::is_enum_v<T>
struct Storage<T, F...> {
    static constexpr bool column = true;
    using type = std::make_signed_t<std::underlying_type_t<T>>;
    static constexpr std::size_t size = sizeof(type), align = alignof(type);
};
template <class... F>
    requires(fields::max_chars<F...> > 0)
struct Storage<std::string, F...> {
    static constexpr bool column = true;
    static constexpr std::size_t size = fields::max_chars<F...>, align = 1;
};

// The native HDF5 type of a stored number.
template <class T>
hid_t native() {
    if constexpr (std::is_same_v<T, std::int8_t>) return H5T_NATIVE_INT8;
    else if constexpr (std::is_same_v<T, std::int32_t>) return H5T_NATIVE_INT32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return H5T_NATIVE_INT64;
    else if constexpr (std::is_same_v<T, std::uint64_t>) return H5T_NATIVE_UINT64;
    else if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
    else if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
    else static_assert(sizeof(T) == 0, "no column type for this field");
}

// A column name under a prefix ("hist_" + "zero"), joined only by the layout builder.
struct Prefixed {
    std::string_view prefix, name;
};
template <class... F>
std::string column_name(std::string_view name, const F&... facts) {
    return std::string(fields::flat_name(name, facts...));
}
template <class... F>
std::string column_name(const Prefixed& n, const F&... facts) {
    return std::string(n.prefix) + std::string(fields::flat_name(n.name, facts...));
}

// Passes a list's fields on under a prefix: Log2Histogram's zero becomes hist_zero.
template <class V>
struct WithPrefix {
    std::string_view prefix;
    V& v;
    template <class T, class... F>
    void operator()(std::string_view name, T& member, const F&... facts) const {
        v(Prefixed{prefix, name}, member, facts...);
    }
};
template <class V>
WithPrefix<V> with_prefix(std::string_view prefix, V& v) {
    return {prefix, v};
}

// Where the next column goes. Put, Get and the layout builder all place columns with it.
template <Packing P>
struct Cursor {
    std::size_t at = 0, align = 1;
    std::size_t place(std::size_t size, std::size_t alignment) {
        if constexpr (P == Packing::Aligned) {
            at = (at + alignment - 1) / alignment * alignment;
            align = std::max(align, alignment);
        }
        const std::size_t here = at;
        at += size;
        return here;
    }
    std::size_t end() const { return P == Packing::Aligned ? (at + align - 1) / align * align : at; }
};

struct Column {
    std::string name;
    std::size_t offset = 0, size = 0;
    hid_t (*native)() = nullptr;  // numbers; a string of `size` characters when null
    H5T_str_t pad = H5T_STR_NULLPAD;
    int since = 1;                // the format version that added it (fields::Since)
    std::string before;           // its name in files before format `renamed` (fields::Renamed)
    int renamed = 0;
};

// A table's row: its columns, its size in memory and a row of default values (what a
// reader gives a column that an older file does not have).
struct Layout {
    std::vector<Column> columns;
    std::size_t size = 0;
    std::vector<unsigned char> defaults;

    // The compound type of all columns, or of those with keep[i].
    Id type(const std::vector<bool>& keep = {}) const;
    // The same columns under the names a file of `format_version` gives them.
    Layout as_of(int format_version) const;
};

// Record -> row.
template <Packing P>
class Put {
public:
    explicit Put(unsigned char* row) : row_(row) {}
    template <class N, class T, class... F>
    void operator()(const N&, const T& value, const F&...) {
        using S = Storage<T, F...>;
        if constexpr (S::column) {
            unsigned char* p = row_ + cursor_.place(S::size, S::align);
            if constexpr (std::is_same_v<T, std::string>) {
                const std::size_t n = std::min(value.size(), S::size);  // longer strings are cut
                std::memcpy(p, value.data(), n);
                std::memset(p + n, 0, S::size - n);
            } else {
                const auto stored = static_cast<typename S::type>(value);
                std::memcpy(p, &stored, sizeof stored);
            }
        }
    }
    void skip(std::size_t bytes) { cursor_.place(bytes, 1); }  // a column written apart

private:
    unsigned char* row_;
    Cursor<P> cursor_;
};

// Row -> record.
template <Packing P>
class Get {
public:
    explicit Get(const unsigned char* row) : row_(row) {}
    template <class N, class T, class... F>
    void operator()(const N&, T& value, const F&...) {
        using S = Storage<T, F...>;
        if constexpr (S::column) {
            const unsigned char* p = row_ + cursor_.place(S::size, S::align);
            if constexpr (std::is_same_v<T, std::string>) {
                const auto* c = reinterpret_cast<const char*>(p);
                value.assign(c, std::find(c, c + S::size, '\0'));
            } else {
                typename S::type stored;
                std::memcpy(&stored, p, sizeof stored);
                value = static_cast<T>(stored);
            }
        }
    }

private:
    const unsigned char* row_;
    Cursor<P> cursor_;
};

// Collects the columns for a Layout.
template <Packing P>
class LayoutBuilder {
public:
    template <class N, class T, class... F>
    void operator()(const N& name, const T&, const F&... facts) {
        using S = Storage<T, F...>;
        if constexpr (S::column) {
            Column c;
            c.name = column_name(name, facts...);
            c.offset = cursor_.place(S::size, S::align);
            c.size = S::size;
            if constexpr (!std::is_same_v<T, std::string>) c.native = &native<typename S::type>;
            c.since = fields::since(facts...);
            if (const auto* r = fields::find<fields::Renamed>(facts...)) {
                c.before = std::string(r->before);
                c.renamed = r->version;
            }
            columns_.push_back(std::move(c));
        }
    }
    // A string whose width is known only at run time (Put::skip passes over it).
    void string(std::string name, std::size_t chars, H5T_str_t pad) {
        columns_.push_back({std::move(name), cursor_.place(chars, 1), chars, nullptr, pad, 1, {}, 0});
    }
    Layout finish() && {
        Layout l;
        l.columns = std::move(columns_);
        l.size = cursor_.end();
        return l;
    }

private:
    Cursor<P> cursor_;
    std::vector<Column> columns_;
};

// The layout of the columns that `visit(v)` visits on default-constructed objects.
template <Packing P = Packing::Packed, class Visit>
Layout make_layout(Visit visit) {
    LayoutBuilder<P> builder;
    visit(builder);
    Layout l = std::move(builder).finish();
    l.defaults.assign(l.size, 0);
    Put<P> put(l.defaults.data());
    visit(put);
    return l;
}

}  // namespace fp8scope::h5
