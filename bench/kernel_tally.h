// Device time summed per kernel name: a KernelListener any backend's tracer can feed
// (Backend::trace_kernels), printed longest first per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend.h"

namespace fp8scope::bench {

class KernelTally : public KernelListener {
public:
    // Forgets what was recorded; later figures are per call of `calls`.
    void reset(int calls) {
        std::lock_guard lock(mutex_);
        ns_.clear();
        count_.clear();
        calls_ = std::max(calls, 1);
    }

    // Device time per call of everything recorded (ms).
    double total_ms() const {
        std::lock_guard lock(mutex_);
        double ns = 0;
        for (const auto& [name, t] : ns_) ns += double(t);
        return ns * 1e-6 / calls_;
    }

    // One line per name, longest first: microseconds, share and launches per call; at most
    // `limit` lines (0: all), the rest summed in one.
    void print(const char* indent = "    ", std::size_t limit = 0) const {
        std::lock_guard lock(mutex_);
        std::vector<std::pair<std::int64_t, std::string>> rows;
        std::int64_t total = 0;
        for (const auto& [name, t] : ns_) rows.emplace_back(t, name), total += t;
        std::sort(rows.rbegin(), rows.rend());
        const double pct = total > 0 ? 100.0 / double(total) : 0.0;
        std::int64_t rest = 0, rest_count = 0;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const auto& [t, name] = rows[i];
            if (limit && i >= limit) {
                rest += t, rest_count += count_.at(name);
                continue;
            }
            std::printf("%s%9.1f us %5.1f%% %5.1f x  %.110s\n", indent, double(t) * 1e-3 / calls_, double(t) * pct,
                        double(count_.at(name)) / calls_, name.c_str());
        }
        if (rest)
            std::printf("%s%9.1f us %5.1f%% %5.1f x  (%zu others)\n", indent, double(rest) * 1e-3 / calls_,
                        double(rest) * pct, double(rest_count) / calls_, rows.size() - limit);
    }

    void on_kernels(const KernelTiming* timings, std::size_t n) override {
        std::lock_guard lock(mutex_);
        for (std::size_t i = 0; i < n; ++i) {
            const std::string name = short_name(timings[i].name);
            ns_[name] += timings[i].end_ns - timings[i].start_ns;
            ++count_[name];
        }
    }

private:
    // The demangled name without its namespaces' "(anonymous namespace)::" and its
    // parameter list (the first '(' outside template arguments).
    static std::string short_name(std::string_view full) {
        std::string name(full);
        for (std::size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;) name.erase(at, 23);
        int depth = 0;
        for (std::size_t i = 0; i < name.size(); ++i) {
            depth += name[i] == '<' ? 1 : name[i] == '>' ? -1 : 0;
            if (name[i] == '(' && depth == 0) return name.substr(0, i);
        }
        return name;
    }

    mutable std::mutex mutex_;
    std::map<std::string, std::int64_t> ns_;
    std::map<std::string, std::int64_t> count_;
    int calls_ = 1;
};

}  // namespace fp8scope::bench
