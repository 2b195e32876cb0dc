// Helpers of the live stream tests: a collecting client and bounded waits. Sample records,
// their bit-exact comparison and temporary directories come from the capture tests'
// fixture (capture/trace_fixture.h), so both suites check records the same way.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capture/trace_fixture.h"
#include "live_client.h"
#include "live_server.h"
#include "trace_records.h"

namespace fp8scope::live::test {

// Sample records, their comparison and temporary directories are the capture tests' own.
using trace::testing::expect_same;
using trace::testing::sample_blockmap;
using trace::testing::sample_event;
using trace::testing::sample_meta;
using trace::testing::sample_op;
using trace::testing::sample_op_name;
using trace::testing::sample_rank_step;
using trace::testing::sample_operand;
using trace::testing::sample_scaling;
using trace::testing::sample_step;
using trace::testing::TempDir;

// --- a client that keeps everything it receives -----------------------------------

struct Collected {
    std::mutex mu;
    std::condition_variable changed;
    std::vector<trace::TraceMeta> meta;
    std::vector<trace::StepRecord> steps;
    std::vector<trace::EventRecord> events;
    std::vector<trace::ScalingRecord> scaling;
    std::vector<trace::OperandRecord> operands;
    std::vector<trace::BlockMapRecord> blockmaps;
    std::vector<trace::OpRecord> ops;
    std::vector<trace::OpNameRecord> op_names;
    std::vector<trace::RankStepRecord> rank_steps;
    std::vector<trace::KernelStepRecord> kernel_steps;
    std::vector<std::string> closed;

    ClientHandlers handlers() {
        auto keep = [this](auto& into) {
            return [this, &into](const auto& r) {
                std::lock_guard lock(mu);
                into.push_back(r);
                changed.notify_all();
            };
        };
        ClientHandlers h;
        h.on_meta = keep(meta);
        h.on_step = keep(steps);
        h.on_event = keep(events);
        h.on_scaling = keep(scaling);
        h.on_operand = keep(operands);
        h.on_blockmap = keep(blockmaps);
        h.on_op = keep(ops);
        h.on_op_name = keep(op_names);
        h.on_rank_step = keep(rank_steps);
        h.on_kernel_step = keep(kernel_steps);
        h.on_closed = keep(closed);
        return h;
    }

    // Waits (at most `timeout`) until `done()` holds under the lock.
    template <class Pred>
    bool wait(Pred done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
        std::unique_lock lock(mu);
        return changed.wait_for(lock, timeout, done);
    }
};

// --- a command handler that records what it is given -----------------------------

// Records every command it is given; refuses SwitchRecipe to "bogus".
struct FakeHandler {
    std::mutex mu;
    std::vector<Command> seen;
    LiveServer::CommandHandler fn() {
        return [this](const Command& c) -> CommandReply {
            std::lock_guard lock(mu);
            seen.push_back(c);
            if (c.kind == CommandKind::SwitchRecipe && c.recipe == "bogus") return {false, "unknown recipe 'bogus'"};
            return {true, ""};
        };
    }
    std::vector<Command> commands() {
        std::lock_guard lock(mu);
        return seen;
    }
};

template <class Pred>
bool eventually(Pred done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
}

}  // namespace fp8scope::live::test
