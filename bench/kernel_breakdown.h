// Where a benchmark's device time goes: the kernels, copies and memsets of a few calls,
// recorded through the engine's own CUPTI tracer, summed per name and printed per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/kernel_tracer.h"

namespace fp8scope::bench {

class KernelBreakdown : public KernelListener {
public:
    // Runs f `calls` times under the tracer; false (and why, printed) when CUPTI is refused.
    bool record(int calls, const std::function<void()>& f) {
        {
            std::lock_guard lock(mutex_);
            ns_.clear();
            count_.clear();
        }
        calls_ = calls;
        auto& tracer = cuda::KernelTracer::instance();
        const std::string why = tracer.start(this);
        if (!why.empty()) {
            std::printf("    (no kernel breakdown: %s)\n", why.c_str());
            return false;
        }
        for (int i = 0; i < calls; ++i) f();
        FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());  // records of unfinished kernels have no times
        tracer.flush();
        tracer.stop();
        return true;
    }

    // Device time per call of everything recorded (ms).
    double total_ms() const {
        std::lock_guard lock(mutex_);
        double ns = 0;
        for (const auto& [name, t] : ns_) ns += double(t);
        return ns * 1e-6 / calls_;
    }

    // One line per name, longest first: calls and microseconds per call.
    void print(const char* indent = "    ") const {
        std::lock_guard lock(mutex_);
        std::vector<std::pair<std::int64_t, std::string>> rows;
        for (const auto& [name, t] : ns_) rows.emplace_back(t, name);
        std::sort(rows.rbegin(), rows.rend());
        for (const auto& [t, name] : rows)
            std::printf("%s%8.1f us  %4.1f x  %.110s\n", indent, double(t) * 1e-3 / calls_,
                        double(count_.at(name)) / calls_, name.c_str());
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
