// Records of one kind kept as columns: one per numeric field of the record's field list
// (capture/trace/record_fields.h), in the list's order, so that a field added to the list
// reaches the series store with no line here or in the store. A view reads a column by
// its member: steps[&trace::StepRecord::loss].
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "record_fields.h"

namespace fp8scope::views {

template <class T>
concept NumericField = std::is_arithmetic_v<T> || std::is_enum_v<T>;

// A numeric field's value as V (an enum's as its number).
template <class V, NumericField T>
V numeric_value(T v) {
    if constexpr (std::is_enum_v<T>) return static_cast<V>(static_cast<std::underlying_type_t<T>>(v));
    else return static_cast<V>(v);
}

// R's numeric fields but `step`, each value as V; the step column is kept as double
// (exact for any step a float would round), ascending, for searches.
template <class R, class V = double>
class RecordColumns {
public:
    std::vector<double> step;

    std::size_t size() const { return step.size(); }

    // The column of a numeric field of R other than step.
    template <class T>
    const std::vector<V>& operator[](T R::*field) const {
        return columns_[column_of(field)];
    }

    void push_back(const R& r) {
        step.push_back(static_cast<double>(r.step));
        std::size_t i = 0;
        visit_columns(r, [&](std::string_view, const auto& value) {
            columns_[i++].push_back(numeric_value<V>(value));
        });
    }

    // Every column but step, in the order of names().
    const std::vector<std::vector<V>>& columns() const { return columns_; }

    // Keeps the first n rows.
    void truncate(std::size_t n) {
        if (step.size() > n) step.resize(n);
        for (auto& c : columns_)
            if (c.size() > n) c.resize(n);
    }

    // Replaces rows [first, last) with `rows`.
    void replace(std::size_t first, std::size_t last, const std::vector<R>& rows) {
        const auto at = [](auto& v, std::size_t i) { return v.begin() + static_cast<std::ptrdiff_t>(i); };
        step.erase(at(step, first), at(step, last));
        for (auto& c : columns_) c.erase(at(c, first), at(c, last));
        RecordColumns added;
        for (const R& r : rows) added.push_back(r);
        step.insert(at(step, first), added.step.begin(), added.step.end());
        for (std::size_t i = 0; i < columns_.size(); ++i)
            columns_[i].insert(at(columns_[i], first), added.columns_[i].begin(), added.columns_[i].end());
    }

    // The fields kept as columns, in order.
    static std::vector<std::string_view> names() {
        std::vector<std::string_view> out;
        visit_columns(R{}, [&](std::string_view name, const auto&) { out.push_back(name); });
        return out;
    }

private:
    // Calls f(name, value) for each numeric field of r but step.
    template <class F>
    static void visit_columns(const R& r, F&& f) {
        visit_fields(r, [&](std::string_view name, const auto& value, const auto&...) {
            if constexpr (NumericField<std::remove_cvref_t<decltype(value)>>)
                if (name != "step") f(name, value);
        });
    }

    // The column of `field`, found by its address in a record.
    template <class T>
    static std::size_t column_of(T R::*field) {
        static const R probe{};
        const void* want = &(probe.*field);
        std::size_t i = 0, found = static_cast<std::size_t>(-1);
        visit_columns(probe, [&](std::string_view, const auto& value) {
            if (static_cast<const void*>(&value) == want) found = i;
            ++i;
        });
        if (found == static_cast<std::size_t>(-1))
            throw std::logic_error("RecordColumns: the field is step or not a numeric field of the record");
        return found;
    }

    std::vector<std::vector<V>> columns_ = std::vector<std::vector<V>>(names().size());
};

}  // namespace fp8scope::views
