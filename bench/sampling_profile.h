// A sampling profile of the host threads for benchmarks on machines without perf: every
// millisecond of process CPU time (SIGPROF) the thread that was running records its call
// stack (glibc backtrace). stop() writes the samples and the process's memory map to a
// file: one "sample" line of return addresses per sample, then the lines of
// /proc/self/maps, so that scripts/symbolize_profile.py can name the frames with addr2line
// on another machine that has the same binaries.
#pragma once

#include <execinfo.h>
#include <signal.h>
#include <sys/time.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>

namespace fp8scope::bench {

class SamplingProfile {
public:
    static constexpr int kDepth = 48;
    static constexpr int kMaxSamples = 200000;

    void start() {
        void* warm[1];
        ::backtrace(warm, 1);  // loads libgcc before the first signal: backtrace is then signal-safe
        instance() = this;
        struct sigaction sa {};
        sa.sa_handler = &SamplingProfile::on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGPROF, &sa, nullptr);
        itimerval t{{0, 1000}, {0, 1000}};
        setitimer(ITIMER_PROF, &t, nullptr);
    }

    // Stops sampling and writes the profile; false when the file could not be written.
    bool stop(const std::string& path) {
        itimerval off{};
        setitimer(ITIMER_PROF, &off, nullptr);
        signal(SIGPROF, SIG_IGN);
        std::FILE* f = std::fopen(path.c_str(), "w");
        if (!f) return false;
        const int n = std::min(count_.load(), kMaxSamples);
        for (int i = 0; i < n; ++i) {
            std::fprintf(f, "sample");
            for (int k = 0; k < depth_[i]; ++k) std::fprintf(f, " %p", frames_[i][k]);
            std::fprintf(f, "\n");
        }
        std::ifstream maps("/proc/self/maps");
        for (std::string line; std::getline(maps, line);) std::fprintf(f, "map %s\n", line.c_str());
        return std::fclose(f) == 0;
    }

private:
    static SamplingProfile*& instance() {
        static SamplingProfile* p = nullptr;
        return p;
    }
    static void on_signal(int) {
        SamplingProfile* p = instance();
        if (!p) return;
        const int i = p->count_.fetch_add(1);
        if (i >= kMaxSamples) return;
        p->depth_[i] = ::backtrace(p->frames_[i], kDepth);
    }

    std::atomic<int> count_{0};
    void* frames_[kMaxSamples][kDepth];
    int depth_[kMaxSamples] = {};
};

}  // namespace fp8scope::bench
