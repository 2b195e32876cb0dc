// Reading a trace while another process writes it (SWMR), and what a run killed with
// SIGKILL leaves behind: a file that opens and holds every record up to the last flush.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

// Blocking pipe I/O of one int64; false on EOF.
bool send(int fd, std::int64_t v) { return write(fd, &v, sizeof v) == sizeof v; }
bool receive(int fd, std::int64_t& v) {
    std::size_t got = 0;
    while (got < sizeof v) {
        ssize_t n = read(fd, reinterpret_cast<char*>(&v) + got, sizeof v - got);
        if (n <= 0) return false;
        got += n;
    }
    return true;
}

void write_step(TraceWriter& w, const TraceMeta& m, std::int64_t s) {
    w.write(sample_step(0, s));
    w.write(sample_scaling(m, 0, s));
    if (s % m.capture_every == 0) w.write(sample_operand(m, {0, s, 1, Gemm::Dgrad, Operand::W}));
    for (int i = 0; i < 3; ++i) w.write(sample_op(0, s, i));
}

void expect_steps(const TraceReader& r, std::int64_t n) {
    auto steps = r.steps(0);
    ASSERT_EQ(steps.size(), static_cast<std::size_t>(n));
    for (std::int64_t s = 0; s < n; ++s) {
        EXPECT_EQ(steps[s].step, s);
        EXPECT_EQ(steps[s].loss, sample_step(0, s).loss);
    }
}

TEST(TraceSwmr, ReaderFollowsAGrowingFileInAnotherProcess) {
    TempDir dir;
    std::string path = dir.file("live.h5");
    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    constexpr int kRounds = 5, kPerRound = 7;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // the writer: a batch, a flush, a report, then wait for the reader
        int code = 0;
        try {
            TraceMeta m = sample_meta();
            TraceWriter w(path, m, {.flush_interval = std::chrono::milliseconds(60000)});
            send(up[1], 0);
            std::int64_t ack = 0;
            if (!receive(down[0], ack)) _exit(1);  // the reader has opened the file
            for (int round = 1; round <= kRounds; ++round) {
                for (int i = 0; i < kPerRound; ++i) write_step(w, m, (round - 1) * kPerRound + i);
                w.flush();
                send(up[1], round * kPerRound);
                if (!receive(down[0], ack)) break;
            }
        } catch (...) {
            code = 1;
        }
        _exit(code);  // without close(): the file stays as SWMR left it mid-run
    }
    close(up[1]);
    close(down[0]);
    std::int64_t n = -1;
    ASSERT_TRUE(receive(up[0], n));
    TraceReader reader(path);  // opened while the writer holds the file
    EXPECT_EQ(reader.steps(0).size(), 0u);
    send(down[1], 0);
    TraceMeta m = sample_meta();
    for (int round = 1; round <= kRounds; ++round) {
        ASSERT_TRUE(receive(up[0], n));
        EXPECT_TRUE(reader.refresh());
        expect_steps(reader, n);
        auto scaling = reader.scaling(0, n - 1, n - 1);
        ASSERT_EQ(scaling.size(), 1u);
        EXPECT_EQ(scaling[0].amax, sample_scaling(m, 0, n - 1).amax);
        auto caps = reader.capture_steps(0);
        ASSERT_FALSE(caps.empty());
        EXPECT_EQ(caps.back(), (n - 1) / 5 * 5);
        auto o = reader.operand({0, caps.back(), 1, Gemm::Dgrad, Operand::W});
        ASSERT_TRUE(o.has_value());
        EXPECT_EQ(o->stats.amax, sample_operand(m, o->key).stats.amax);
        EXPECT_EQ(reader.ops(0, 0, n).size(), static_cast<std::size_t>(3 * n));
        EXPECT_FALSE(reader.refresh());  // nothing new until the writer goes on
        send(down[1], round);
    }
    close(down[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(up[0]);
}

// The child writes without pause and reports, after each flush(), how many steps are
// on disk; the parent kills it with SIGKILL at a varying point, mid-write.
void kill_and_check(int kill_after) {
    TempDir dir;
    std::string path = dir.file("killed.h5");
    int up[2];
    ASSERT_EQ(pipe(up), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(up[0]);
        try {
            TraceMeta m = sample_meta();
            TraceWriter w(path, m, {.flush_interval = std::chrono::milliseconds(5)});
            for (std::int64_t s = 0; s < 1000000; ++s) {
                write_step(w, m, s);
                if (s % 10 == 9) {
                    w.flush();
                    send(up[1], s + 1);
                }
            }
        } catch (...) {
        }
        _exit(1);
    }
    close(up[1]);
    std::int64_t flushed = 0, n = 0;
    while (flushed < kill_after && receive(up[0], n)) flushed = n;
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(up[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer ended before it was killed";
    ASSERT_GE(flushed, kill_after);

    TraceReader r(path);
    auto steps = r.steps(0);
    ASSERT_GE(steps.size(), static_cast<std::size_t>(flushed));
    for (std::size_t s = 0; s < steps.size(); ++s) {
        ASSERT_EQ(steps[s].step, static_cast<std::int64_t>(s));
        ASSERT_EQ(steps[s].grad_norm, sample_step(0, s).grad_norm);
    }
    TraceMeta m = sample_meta();
    for (std::int64_t s = 0; s < flushed; s += m.capture_every) {
        auto o = r.operand({0, s, 1, Gemm::Dgrad, Operand::W});
        ASSERT_TRUE(o.has_value()) << "step " << s;
        EXPECT_EQ(o->stats.outliers.channel_absmax, as_stored(sample_operand(m, o->key)).stats.outliers.channel_absmax);
    }
    EXPECT_GE(r.scaling(0, 0, flushed).size(), static_cast<std::size_t>(flushed));
    EXPECT_GE(r.ops(0, 0, flushed).size(), static_cast<std::size_t>(3 * flushed));
}

TEST(TraceSwmr, KilledWriterLeavesEveryFlushedStep) {
    for (int kill_after : {10, 40, 150, 400}) {
        SCOPED_TRACE(kill_after);
        kill_and_check(kill_after);
    }
}

}  // namespace
}  // namespace fp8scope::trace
