// The per-step kernel sums in a trace (/kernel_steps, format 6): written by the kernel
// recorder every step, read back as written; the individual records only on the steps the
// policy kept; the mode and window in the root attributes. A format-5 file (no sums) gets
// them made from its records, the same as the recorder's; compact writes them.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <map>
#include <set>
#include <tuple>

#include "kernel_recorder.h"
#include "trace_compact.h"
#include "trace_fixture.h"
#include "trace_schema.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {

using testing::TempDir;

constexpr int kSteps = 12;
const char* const kNames[] = {"nvjet_gemm", "cast_fp8", "memcpy HtoD"};

TraceMeta meta_of(const std::string& mode, std::int64_t window) {
    TraceMeta m = testing::sample_meta();
    m.kernel_timings = mode;
    m.kernel_window = window;
    return m;
}

// Per step and run: 6 kernels in the scopes of fprop (ops 0) and dgrad (1), of lengths that
// follow from step, run and place; a copy outside every op before each run's first kernel.
// Returns what each (run, step, name, parent) must sum to: count, total, min, max.
using Want = std::map<std::tuple<int, std::int64_t, std::string, int>, std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>>;
Want feed(KernelRecorder& k, const std::set<std::int64_t>& capture, std::int64_t event_step) {
    Want want;
    std::uint64_t scope = 0;
    for (std::int64_t step = 1; step <= kSteps; ++step) {
        k.begin_step(step, capture.count(step) > 0);
        std::vector<KernelTiming> t;
        std::int64_t at = step * 1'000'000;
        for (int run = 0; run < 2; ++run) {
            const std::int64_t copy = 100 + run;
            t.push_back({KernelTiming::Kind::Memcpy, kNames[2], 0, 3, at, at + copy, 1024, 0});
            auto& [cc, ct, cl, ch] = want[{run, step, kNames[2], -1}];
            cc = 1, ct = copy, cl = copy, ch = copy;
            at += copy + 10;
            for (int i = 0; i < 6; ++i) {
                const int parent = i % 2;
                OpRecord host;
                host.run = run, host.step = step, host.op = parent;
                k.note_scope(++scope, host);
                const std::int64_t len = 1000 + 37 * i + 11 * run + step;
                const char* name = kNames[i % 3 == 2 ? 1 : 0];
                t.push_back({KernelTiming::Kind::Kernel, name, 0, 7, at, at + len, 0, scope});
                at += len + 5;
                auto& [c, total, lo, hi] = want[{run, step, name, parent}];
                lo = c ? std::min(lo, len) : len;
                hi = c ? std::max(hi, len) : len;
                ++c;
                total += len;
            }
        }
        k.on_kernels(t.data(), t.size());
        if (step == event_step) k.mark_event();
    }
    k.flush();
    return want;
}

std::string name_of(const TraceMeta& m, int op) { return m.ops.at(static_cast<std::size_t>(op)); }

void expect_sums(const TraceReader& r, const Want& want) {
    std::size_t seen = 0;
    for (int run = 0; run < 2; ++run)
        for (const KernelStepRecord& s : r.kernel_steps(run, INT64_MIN, INT64_MAX)) {
            const auto it = want.find({s.run, s.step, name_of(r.meta(), s.op), s.parent});
            ASSERT_NE(it, want.end()) << "run " << s.run << " step " << s.step << " " << name_of(r.meta(), s.op);
            const auto [count, total, lo, hi] = it->second;
            EXPECT_EQ(s.count, count);
            EXPECT_EQ(s.total_ns, total);
            EXPECT_EQ(s.min_ns, lo);
            EXPECT_EQ(s.max_ns, hi);
            ++seen;
        }
    EXPECT_EQ(seen, want.size());
}

std::set<std::int64_t> device_steps(const TraceReader& r, int run) {
    std::set<std::int64_t> out;
    for (const OpRecord& o : r.ops(run, INT64_MIN, INT64_MAX))
        if (o.device >= 0) out.insert(o.step);
    return out;
}

// Format 5: no /kernel_steps, the version attribute 5.
void to_format5(const std::string& path) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ldelete(f, schema::kKernelSteps, H5P_DEFAULT), 0);
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    const std::int64_t v = 5;
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &v), 0);
    H5Aclose(a);
    for (const char* attr : {"kernel_timings", "kernel_window"}) H5Adelete(f, attr);
    H5Fclose(f);
}

TEST(TraceKernelSteps, EveryStepSummedRecordsOnlyWhereKept) {
    TempDir dir;
    const std::string path = dir.file("run.h5");
    Want want;
    {
        const TraceMeta meta = meta_of("capture", 2);
        TraceWriter w(path, meta);
        OpNames names(meta.ops);
        KernelRecorder k(w, names, KernelPolicy::parse("capture", 2));
        want = feed(k, {1, 11}, 6);
        w.close();
    }
    TraceReader r(path);
    EXPECT_EQ(r.meta().format_version, kFormatVersion);
    EXPECT_EQ(r.meta().kernel_timings, "capture");
    EXPECT_EQ(r.meta().kernel_window, 2);
    expect_sums(r, want);
    // Capture steps 1 and 11, and 4..8 around the event at 6.
    const std::set<std::int64_t> kept = {1, 4, 5, 6, 7, 8, 11};
    for (int run = 0; run < 2; ++run) {
        EXPECT_EQ(device_steps(r, run), kept) << "run " << run;
        for (const KernelStepRecord& s : r.kernel_steps(run, INT64_MIN, INT64_MAX))
            EXPECT_EQ(s.detailed, kept.count(s.step) ? 1 : 0) << "step " << s.step;
        // Every step has its sums, also those without records.
        EXPECT_EQ(r.row_steps(run, 1, kSteps).size(), std::size_t(kSteps));
    }
    // A range reads its steps alone.
    for (const KernelStepRecord& s : r.kernel_steps(1, 3, 5)) {
        EXPECT_EQ(s.run, 1);
        EXPECT_TRUE(s.step >= 3 && s.step <= 5);
    }
    // The sums are compressed and read by position, as /ops.
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, schema::kKernelSteps, H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d);
    EXPECT_EQ(H5Pget_nfilters(dcpl), 2);
    H5Pclose(dcpl);
    H5Dclose(d);
    H5Fclose(f);
}

TEST(TraceKernelSteps, Format5FileGetsItsSumsFromItsRecordsAndCompactWritesThem) {
    TempDir dir;
    const std::string v5 = dir.file("v5.h5"), out = dir.file("v6.h5");
    Want want;
    {
        const TraceMeta meta = meta_of("all", 0);
        TraceWriter w(v5, meta);
        OpNames names(meta.ops);
        KernelRecorder k(w, names, KernelPolicy::parse("all"));
        want = feed(k, {}, -1);
        w.close();
    }
    to_format5(v5);
    {
        TraceReader r(v5);
        EXPECT_EQ(r.meta().format_version, 5);
        EXPECT_EQ(r.meta().kernel_timings, "");  // not recorded: every record was kept
        expect_sums(r, want);
        for (const KernelStepRecord& s : r.kernel_steps(0, INT64_MIN, INT64_MAX)) EXPECT_EQ(s.detailed, 1);
    }
    const CompactCounts n = compact_trace(v5, out);
    EXPECT_EQ(n.kernel_steps, want.size());
    EXPECT_EQ(compare_traces(v5, out), "");
    TraceReader r(out);
    EXPECT_EQ(r.meta().format_version, kFormatVersion);
    expect_sums(r, want);
    hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    EXPECT_GT(H5Lexists(f, "kernel_steps", H5P_DEFAULT), 0);
    H5Fclose(f);
}

TEST(TraceKernelSteps, ADamagedSumIsNamed) {
    TempDir dir;
    const std::string path = dir.file("run.h5");
    {
        const TraceMeta meta = meta_of("all", 0);
        TraceWriter w(path, meta);
        w.write(KernelStepRecord{0, 1, 0, -1, OpKind::Kernel, 1, 3, 30, 5, 15, 0});
        w.close();
    }
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, schema::kKernelSteps, H5P_DEFAULT);
    hid_t mem = H5Tcreate(H5T_COMPOUND, sizeof(std::int32_t));
    H5Tinsert(mem, "op", 0, H5T_NATIVE_INT32);
    const std::int32_t bad = 999;
    EXPECT_GE(H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, &bad), 0);
    H5Tclose(mem);
    H5Dclose(d);
    H5Fclose(f);
    try {
        TraceReader r(path);
        ADD_FAILURE() << "a sum of op 999 was read";
    } catch (const TraceError& e) {
        EXPECT_NE(std::string(e.what()).find("/kernel_steps row 0: op 999"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace fp8scope::trace
