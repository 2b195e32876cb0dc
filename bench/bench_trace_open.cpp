// Opening traces: how long the reader takes to open (index) and read back everything the
// GUI loads, and the peak memory of doing so, on two shapes the GUI must handle:
//   rewind-heavy: a run that goes back a few steps every few steps (loss spikes), so the
//                 op and operand rows arrive out of step order again and again;
//   large:        20,000 steps of a four-run comparison, operands every 20 steps (~500 MB);
//   huge:         (only with --huge 1) 1,000,000 steps of a four-run comparison of a model
//                 of 48 linears, kernel sums every step (~10 GB): opened whole ("before",
//                 the index alone) and as an overview ("after": decimated steps plus the
//                 newest steps whole, what the GUI's first view shows, then the kernel
//                 sums and the amax and scale of every operand slot decimated), then a
//                 zoom into 10,000 steps read at full detail.
// Each trace is written with the TraceWriter, then opened in a child process so that its
// peak RSS is the reader's alone (wait4's rusage), not the writer's. With --keep 1 the
// traces stay in --dir, and a huge trace found there is opened again, not rewritten; with
// --cold 1 each open starts with the file's pages dropped from the page cache.
//
//   bench_trace_open [--rewind-steps N] [--rewind-every K] [--rewind-by B]
//                    [--large-steps N] [--capture-every C] [--ops-per-step P] [--channels K]
//                    [--huge 1] [--huge-steps N] [--dir DIR] [--keep 1] [--cold 1]
//                    [--only rewind|large|huge]
//   bench_trace_open --open PATH           (the child: open, read, print; used by the above)
//   bench_trace_open --open-index PATH     (the child: open whole, index only)
//   bench_trace_open --open-overview PATH  (the child: open as an overview, first view, zoom)
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "trace_reader.h"
#include "trace_writer.h"

using namespace fp8scope;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
    std::int64_t steps = 0;        // step records written, rewound ones included
    std::int64_t capture_every = 20;
    std::int64_t rewind_every = 0;  // 0: no rewinds
    std::int64_t rewind_by = 0;
    int runs = 4, linears = 16, ops_per_step = 60, channels = 64;
    bool huge = false;  // noisy series, kernel sums every step, kernel records on capture steps only
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

trace::TraceMeta meta_of(const Shape& s) {
    trace::TraceMeta m;
    m.tool_version = "bench";
    for (const char* r : {"baseline", "delayed", "blockwise", "mxfp8"}) m.runs.push_back({r, r});
    m.runs.resize(s.runs, {"extra", "current"});
    for (int l = 0; l < s.linears; ++l) m.linears.push_back({"blocks." + std::to_string(l / 4) + ".l" + std::to_string(l % 4), l / 4, 512, 512});
    m.quantizers = {"current_e4m3", "block1x128", "block128x128", "mxfp8_e4m3"};
    m.training_recipes = {"baseline", "delayed", "blockwise", "mxfp8"};
    for (int k = 0; k < 12; ++k) m.ops.push_back("op" + std::to_string(k));
    m.capture_every = s.capture_every;
    return m;
}

// One step of every run, in the engine's order: scaling, operands, ops, then the step record.
void write_step(trace::TraceWriter& w, const Shape& s, std::int64_t step, double jitter) {
    const int slots = s.linears * trace::kOperandsPerLinear;
    for (int run = 0; run < s.runs; ++run) {
        trace::ScalingRecord sc{run, step, std::vector<float>(slots, 1.0f + float(jitter)), std::vector<float>(slots, 448.0f)};
        w.write(std::move(sc));
        if ((step - 1) % s.capture_every == 0)
            for (int l = 0; l < s.linears; ++l)
                for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                    for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
                        if (trace::operand_slot(l, g, o) < 0) continue;
                        trace::OperandRecord r;
                        r.key = {run, step, l, g, o};
                        r.quantizer_in_use = run == 0 ? -1 : run - 1;
                        r.scale = 448.0;
                        r.stats.amax = 2.0 + jitter;
                        for (int e = -24; e < 2; ++e) r.stats.histogram.bins[e - kHistMinExp] = 1000 + e;
                        r.stats.outliers.channel_absmax.assign(s.channels, 1.0f);
                        r.errors.resize(4);
                        r.amax_history.assign(16, 1.0f);
                        w.write(std::move(r));
                    }
        std::int64_t t = step * 1'000'000;
        for (int k = 0; k < s.ops_per_step; ++k, t += 1000)
            w.write(trace::OpRecord{run, step, k % 12, k % s.linears, -1, -1, 0, t, t + 900});
        w.write(trace::StepRecord{run, step, 5.0 - 1e-4 * step + jitter, NAN, 1e-3, 1.0, 0.2, 5e4, run});
    }
}

// One step of every run of the huge shape: a loss that falls with noise and a one-step
// spike every 97,001 steps (what the overview must keep), kernel sums every step, and the
// kernel records only on capture steps, as the engine's default kernel window writes them.
void write_huge_step(trace::TraceWriter& w, const Shape& s, std::int64_t step, std::uint64_t& rng) {
    const auto noise = [&rng] {  // xorshift: uniform in [-0.5, 0.5)
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        return static_cast<double>(rng >> 11) / 9007199254740992.0 - 0.5;
    };
    const int slots = s.linears * trace::kOperandsPerLinear;
    const bool capture = (step - 1) % s.capture_every == 0;
    for (int run = 0; run < s.runs; ++run) {
        trace::ScalingRecord sc{run, step, std::vector<float>(slots), std::vector<float>(slots)};
        for (int k = 0; k < slots; ++k) {
            sc.amax[k] = static_cast<float>(1.0 + 0.2 * noise() + 0.01 * k);
            sc.scale[k] = 448.0f / sc.amax[k];
        }
        w.write(std::move(sc));
        std::int64_t t = step * 1'000'000;
        if (capture)
            for (int k = 0; k < s.ops_per_step; ++k, t += 1000)
                w.write(trace::OpRecord{run, step, k % 12, k % s.linears, -1, 0, 7, t, t + 900, trace::OpKind::Kernel, 0});
        for (int k = 0; k < 4; ++k)
            w.write(trace::KernelStepRecord{run, step, k, 0, trace::OpKind::Kernel, capture ? 1 : 0, 8,
                                            8000 + static_cast<std::int64_t>(900 * noise()), 900, 1100, 0});
        double loss = 2.0 + 3.0 * std::exp(-step / 300000.0) + 0.02 * noise() + 0.005 * run;
        if (step % 97001 == 0) loss += 1.5;
        w.write(trace::StepRecord{run, step, loss, step % 5000 == 0 ? loss - 0.01 : NAN, 1e-3 * (1 - step / 2e6),
                                  1.0 + 0.3 * noise(), 130 + 5 * noise(), 5e4 + 1e3 * noise(), run});
    }
}

// Steps 1, 2, ...; every `rewind_every` steps the run goes back `rewind_by` steps and
// records them again (as after a rewind to a checkpoint), until `steps` records are written.
void write_trace(const std::string& path, const Shape& s) {
    trace::TraceWriter w(path, meta_of(s));
    std::int64_t step = 1;
    std::uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (std::int64_t n = 0; n < s.steps; ++n, ++step) {
        if (s.huge) write_huge_step(w, s, step, rng);
        else write_step(w, s, step, n * 1e-6);
        if (s.rewind_every > 0 && n % s.rewind_every == s.rewind_every - 1 && step > s.rewind_by) {
            w.write(trace::EventRecord{-1, step, EventKind::Rewind, "bench"});
            step -= s.rewind_by;
        }
    }
    w.close();
}

// The child: open (index) the trace, then read every record the GUI's loader reads.
int open_and_read(const std::string& path) {
    auto t0 = Clock::now();
    trace::TraceReader reader(path);
    const double open_s = seconds_since(t0);
    std::size_t steps = 0, scaling = 0, ops = 0, operands = 0;
    for (int run = 0; run < static_cast<int>(reader.meta().runs.size()); ++run) {
        steps += reader.steps(run).size();
        const std::int64_t last = reader.last_step(run);
        scaling += reader.scaling(run, 0, last).size();
        ops += reader.ops(run, 0, last).size();
        for (std::int64_t step : reader.capture_steps(run)) operands += reader.operands(run, step).size();
    }
    const double read_s = seconds_since(t0);
    std::fflush(stdout);
    std::printf("open %.3f s, open+read %.3f s (%zu step, %zu scaling, %zu op, %zu operand records)", open_s, read_s,
                steps, scaling, ops, operands);
    return 0;
}

// The child, before: the trace opened whole, as the GUI opened every trace (the index of
// every row), before any series is read into the views.
int open_index(const std::string& path) {
    auto t0 = Clock::now();
    trace::TraceReader reader(path);
    std::printf("open whole (index only) %.3f s", seconds_since(t0));
    return 0;
}

// The child, after: opened as an overview; the first view is every record of the newest
// steps (what the GUI shows first), then the decimated steps of every run (the loss plot
// of the whole run, which the GUI shows next), then a zoom into 10,000 steps in the
// middle of the run is read at full detail.
int open_overview(const std::string& path) {
    auto t0 = Clock::now();
    trace::TraceReader reader(path, {.min_step_rows = 1});
    const double open_s = seconds_since(t0);
    std::size_t shown = 0, tail = 0;
    std::int64_t last = 0;
    for (int run = 0; run < static_cast<int>(reader.meta().runs.size()); ++run) {
        last = std::max(last, reader.last_step(run));
        const std::int64_t from = reader.detail_from();
        tail += reader.steps(run).size() + reader.scaling(run, from, last).size() + reader.ops(run, from, last).size() +
                reader.kernel_steps(run, from, last).size();
        for (std::int64_t step : reader.capture_steps(run)) tail += reader.operands(run, step).size();
    }
    const double first_s = seconds_since(t0);
    for (int run = 0; run < static_cast<int>(reader.meta().runs.size()); ++run) shown += reader.step_overview(run).size();
    const double whole_s = seconds_since(t0);
    auto t4 = Clock::now();
    std::size_t sums = 0;
    for (int run = 0; run < static_cast<int>(reader.meta().runs.size()); ++run) sums += reader.kernel_step_overview(run).size();
    const double sums_s = seconds_since(t4);
    auto t2 = Clock::now();
    std::size_t points = 0;
    for (int run = 0; run < static_cast<int>(reader.meta().runs.size()); ++run)
        for (const auto& slot : reader.scaling_overview(run)) points += slot.size();
    const double scaling_s = seconds_since(t2);
    auto t1 = Clock::now();
    std::size_t zoomed = 0, zoomed_scaling = 0, zoomed_sums = 0;
    for (int run = 0; run < static_cast<int>(reader.meta().runs.size()); ++run)
        zoomed += reader.steps(run, last / 2 - 5000, last / 2 + 4999).size();
    const double zoom_s = seconds_since(t1);
    auto t3 = Clock::now();
    for (int run = 0; run < static_cast<int>(reader.meta().runs.size()); ++run)
        zoomed_scaling += reader.scaling_detail(run, last / 2 - 5000, last / 2 + 4999).size();
    const double zoom_scaling_s = seconds_since(t3);
    auto t5 = Clock::now();
    for (int run = 0; run < static_cast<int>(reader.meta().runs.size()); ++run)
        zoomed_sums += reader.kernel_steps_detail(run, last / 2 - 5000, last / 2 + 4999).size();
    std::printf("overview open %.3f s, first view %.3f s (%zu records of the newest %lld steps), whole run decimated "
                "%.3f s (%zu step records), kernel sums decimated %.3f s more (%zu sums), amax and scale of every slot "
                "decimated %.3f s more (%zu points of %zu), zoom to 10,000 steps %.3f s (%zu step records), their amax "
                "and scale %.3f s (%zu scaling records), their kernel sums %.3f s (%zu sums)",
                open_s, first_s, tail, static_cast<long long>(last - reader.detail_from() + 1), whole_s, shown, sums_s,
                sums, scaling_s, points,
                static_cast<std::size_t>(reader.meta().linears.size() * trace::kOperandsPerLinear) *
                    static_cast<std::size_t>(last) * reader.meta().runs.size(),
                zoom_s, zoomed, zoom_scaling_s, zoomed_scaling, seconds_since(t5), zoomed_sums);
    return 0;
}

// Runs this program with --open PATH and prints the child's figures and its peak RSS.
// Drops the file's pages from the page cache, so the next open reads from the disk (a
// trace opened the first time since it was copied or written long ago).
void drop_cached(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

bool g_cold = false;  // --cold 1: every measured open starts from a cold page cache

void measure(const char* self, const std::string& name, const std::string& path, const char* mode = "--open") {
    struct stat st {};
    stat(path.c_str(), &st);
    if (g_cold) drop_cached(path);
    std::printf("%-7s %.1f MB (%.1f MB on disk): ", name.c_str(), st.st_size / 1e6, st.st_blocks * 512 / 1e6);
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, mode, path.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    std::printf(", peak RSS %.1f MB%s\n", ru.ru_maxrss * 1024.0 / 1e6, WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "" : " (FAILED)");
}

}  // namespace

int main(int argc, char** argv) {
    Shape rewind, large, huge;
    rewind.steps = 4000, rewind.capture_every = 5, rewind.rewind_every = 5, rewind.rewind_by = 3;
    large.steps = 20000, large.capture_every = 20, large.ops_per_step = 30, large.channels = 32;  // ~500 MB
    huge.steps = 1'000'000, huge.capture_every = 100'000, huge.linears = 48, huge.ops_per_step = 30, huge.huge = true;
    std::string dir = std::filesystem::temp_directory_path().string(), only;
    bool keep = false, with_huge = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--open" || a == "--open-index" || a == "--open-overview") {
            try {
                return a == "--open" ? open_and_read(v) : a == "--open-index" ? open_index(v) : open_overview(v);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "%s\n", e.what());
                return 1;
            }
        }
        const std::int64_t n = std::atoll(v.c_str());
        if (a == "--rewind-steps") rewind.steps = n;
        else if (a == "--rewind-every") rewind.rewind_every = n;
        else if (a == "--rewind-by") rewind.rewind_by = n;
        else if (a == "--large-steps") large.steps = n;
        else if (a == "--capture-every") large.capture_every = n;
        else if (a == "--ops-per-step") rewind.ops_per_step = large.ops_per_step = static_cast<int>(n);
        else if (a == "--channels") rewind.channels = large.channels = static_cast<int>(n);
        else if (a == "--dir") dir = v;
        else if (a == "--only") only = v;
        else if (a == "--keep") keep = n != 0;
        else if (a == "--huge") with_huge = n != 0;
        else if (a == "--cold") g_cold = n != 0;
        else if (a == "--huge-steps") huge.steps = n;
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    const std::pair<const char*, const Shape*> traces[] = {{"rewind", &rewind}, {"large", &large}, {"huge", &huge}};
    for (const auto& [name, shape] : traces) {
        if (!only.empty() && only != name) continue;
        if (shape == &huge && !with_huge) continue;
        const std::string path = dir + "/bench_trace_open_" + name + ".h5";
        if (shape == &huge && keep && std::filesystem::exists(path)) {
            std::printf("%s: kept from an earlier run\n", name);
        } else {
            auto t0 = Clock::now();
            write_trace(path, *shape);
            std::printf("%s: %lld step records x %d runs, capture every %lld, rewind every %lld by %lld; written in %.1f s\n",
                        name, static_cast<long long>(shape->steps), shape->runs, static_cast<long long>(shape->capture_every),
                        static_cast<long long>(shape->rewind_every), static_cast<long long>(shape->rewind_by),
                        seconds_since(t0));
        }
        if (shape == &huge) {
            measure(argv[0], name, path, "--open-index");
            measure(argv[0], name, path, "--open-overview");
        } else {
            measure(argv[0], name, path);
        }
        if (!keep) std::filesystem::remove(path);
    }
    return 0;
}
