// The numeric figures of a record in a fixed array of doubles: every numeric field of its
// field list (core/fp8/stats_fields.h, capture/trace/record_fields.h) and of the records
// nested in it, in list order; vectors and arrays are left out. A field added to a list
// is kept with no line here or where the figures are filled. Read by member:
// figures[&ErrorStats::sqnr_db], figures[&OutlierSummary::kurtosis].
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "models/record_columns.h"
#include "util/field_list.h"

namespace fp8scope::views {

namespace figures_detail {

// Calls f(value) for each numeric field of r and of the records nested in it.
template <class R, class F>
void walk(R& r, F&& f) {
    visit_fields(r, [&](std::string_view, auto& value, const auto&...) {
        using T = std::remove_cvref_t<decltype(value)>;
        if constexpr (NumericField<T>) f(value);
        else if constexpr (fields::Record<T>) walk(value, f);
    });
}

// The same walk with the fields' names, nested ones after their record's and a dot.
template <class R, class F>
void walk_named(R& r, F&& f, const std::string& prefix = {}) {
    visit_fields(r, [&](std::string_view name, auto& value, const auto&...) {
        using T = std::remove_cvref_t<decltype(value)>;
        if constexpr (NumericField<T>) f(prefix + std::string(name));
        else if constexpr (fields::Record<T>) walk_named(value, f, prefix + std::string(name) + ".");
    });
}

template <class R>
constexpr std::size_t count() {
    R r{};
    std::size_t n = 0;
    visit_fields(r, [&](std::string_view, auto& value, const auto&...) {
        using T = std::remove_cvref_t<decltype(value)>;
        if constexpr (NumericField<T>) ++n;
        else if constexpr (fields::Record<T>) n += count<T>();
    });
    return n;
}

}  // namespace figures_detail

template <class R>
class RecordFigures {
public:
    static constexpr std::size_t kCount = figures_detail::count<R>();

    static RecordFigures of(const R& r) {
        RecordFigures out;
        std::size_t i = 0;
        figures_detail::walk(r, [&](const auto& v) { out.v_[i++] = numeric_value<double>(v); });
        return out;
    }

    // The figure of `field`, a member of R or of a record nested in it.
    template <class S, class T>
    double operator[](T S::*field) const {
        return v_[index_of(field)];
    }

    // Every figure, in names() order.
    const std::array<double, kCount>& values() const { return v_; }

    // The figures' names in order, nested ones after their record's name and a dot
    // ("outliers.kurtosis").
    static std::vector<std::string> names() {
        std::vector<std::string> out;
        figures_detail::walk_named(probe(), [&](const std::string& name) { out.push_back(name); });
        return out;
    }

private:
    static const R& probe() {
        static const R r{};
        return r;
    }

    // Where `field` lies in probe(): the address of the member in the first record of
    // type S met on the walk (R itself included).
    template <class S, class T>
    static std::size_t index_of(T S::*field) {
        const void* want = nullptr;
        auto find = [&](const auto& rec, auto& self) -> void {
            using Rec = std::remove_cvref_t<decltype(rec)>;
            if constexpr (std::is_same_v<Rec, S>) {
                if (!want) want = &(rec.*field);
            } else {
                visit_fields(rec, [&](std::string_view, const auto& value, const auto&...) {
                    if constexpr (fields::Record<std::remove_cvref_t<decltype(value)>>) self(value, self);
                });
            }
        };
        find(probe(), find);
        std::size_t i = 0, found = kCount;
        figures_detail::walk(probe(), [&](const auto& value) {
            if (static_cast<const void*>(&value) == want) found = i;
            ++i;
        });
        if (found == kCount) throw std::logic_error("RecordFigures: not a numeric field of the record");
        return found;
    }

    std::array<double, kCount> v_{};
};

}  // namespace fp8scope::views
