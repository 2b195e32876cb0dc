// The field-list pattern of the statistics structs and the trace records. Each struct has
// one function, visit_fields(s, v), declared next to it, that names its fields once, in
// declaration order, by calling v(name, member, facts...). Every codec is a visitor over
// that list (HDF5 tables, the live wire, JSON, CSV, the tests' comparisons), so adding a
// field is one line in its list. Visitors are templates: after inlining, a list walked
// by a row or wire codec is a sequence of direct member copies, with no names looked up.
#pragma once

#include <concepts>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace fp8scope::fields {

// One list serves both directions: `S` is T (readers fill it) or const T (writers).
template <class S, class T>
concept Of = std::same_as<std::remove_const_t<S>, T>;

// Facts a list may give after a field's member. A visitor uses the ones it needs.
template <std::size_t N>
struct MaxChars {};  // a string kept in N characters where the width is fixed (HDF5 columns)
template <class E>
struct Last {        // an enum's largest valid value: decoders refuse anything past it
    E value;
};
struct FlatName {    // its name in a flat table beside other structs' fields
    std::string_view name;
};
struct Setting {};   // a setting the other figures were computed with, not a figure itself
struct Since {       // the trace format version that added the field (docs/trace-format.md)
    int version;
};
struct Renamed {     // the trace format version that renamed the field, and its name before
    std::string_view before;
    int version;
};

// A struct with a field list.
struct AnyVisitor {
    template <class... A>
    void operator()(A&&...) const {}
};
template <class T>
concept Record = requires(T& t) { visit_fields(t, AnyVisitor{}); };

// A field that holds one value: what a flat row (a table row, a CSV line) can hold.
template <class T>
concept Scalar = std::is_arithmetic_v<T> || std::is_enum_v<T> || std::same_as<T, std::string>;

// Looking facts up in a visitor's `facts...` pack.
template <class T, class... F>
inline constexpr bool has = (std::is_same_v<T, F> || ...);

template <class F>
struct CharsOf : std::integral_constant<std::size_t, 0> {};
template <std::size_t N>
struct CharsOf<MaxChars<N>> : std::integral_constant<std::size_t, N> {};
template <class... F>
inline constexpr std::size_t max_chars = (std::size_t{0} + ... + CharsOf<F>::value);

// The fact of type T among a field's facts, or nullptr.
template <class T, class... F>
constexpr const T* find(const F&... facts) {
    const T* out = nullptr;
    ([&](const auto& f) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(f)>, T>) out = &f;
    }(facts), ...);
    return out;
}

template <class... F>
constexpr std::string_view flat_name(std::string_view name, const F&... facts) {
    const FlatName* f = find<FlatName>(facts...);
    return f ? f->name : name;
}

template <class... F>
constexpr int since(const F&... facts) {
    const Since* s = find<Since>(facts...);
    return s ? s->version : 1;
}

// The largest valid value of enum E from its Last<E> fact; the type's maximum without one.
template <class E, class... F>
constexpr auto last(const F&... facts) {
    using U = std::underlying_type_t<E>;
    const Last<E>* l = find<Last<E>>(facts...);
    return l ? static_cast<U>(l->value) : std::numeric_limits<U>::max();
}

// Visits only the Scalar fields of `s`: the columns it brings to a flat table. Nested
// structs, vectors and arrays are left to the table, which stores them its own way.
template <class S, class V>
void visit_scalars(S& s, V&& v) {
    visit_fields(s, [&](std::string_view name, auto& member, const auto&... facts) {
        if constexpr (Scalar<std::remove_cvref_t<decltype(member)>>) v(name, member, facts...);
    });
}

}  // namespace fp8scope::fields
