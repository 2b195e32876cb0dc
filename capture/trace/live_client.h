// The GUI's side of the live stream: connects to an engine, receives its records on a
// reader thread and sends commands. No Qt here; the GUI marshals the callbacks onto its
// own threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "live_protocol.h"
#include "trace_records.h"

namespace fp8scope::live {

struct ClientHandlers {
    std::function<void(const trace::TraceMeta&)> on_meta;  // first, once
    std::function<void(const trace::StepRecord&)> on_step;
    std::function<void(const trace::EventRecord&)> on_event;
    std::function<void(const trace::ScalingRecord&)> on_scaling;
    std::function<void(const trace::OperandRecord&)> on_operand;
    std::function<void(const trace::BlockMapRecord&)> on_blockmap;
    std::function<void(const trace::OpRecord&)> on_op;
    // An op name that appeared after on_meta's table, before the records that use its id.
    std::function<void(const trace::OpNameRecord&)> on_op_name;
    std::function<void(const trace::RankStepRecord&)> on_rank_step;  // data-parallel runs
    std::function<void(const trace::KernelStepRecord&)> on_kernel_step;  // a step's kernel sums
    std::function<void(const std::string& why)> on_closed;  // engine ended, connection lost
    // A consumer that takes records at its own pace (a GUI's redraws) lets the reader rest
    // this long after it emptied the socket, so that a step's records arrive in one read
    // instead of one wake-up each; 0: read each record as it comes.
    int coalesce_ms = 0;
};

class LiveClient {
public:
    // Connects and authenticates. Throws LiveError with a message a user can act on:
    // "connection refused", "wrong token", "not an fp8scope engine", protocol version.
    // Handlers run on the client's reader thread.
    LiveClient(const Endpoint& endpoint, const std::string& token, ClientHandlers handlers);
    ~LiveClient();
    LiveClient(const LiveClient&) = delete;
    LiveClient& operator=(const LiveClient&) = delete;

    // Sends a command and waits for the engine's reply (a timeout is a failed reply).
    CommandReply send(const Command& command,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5));
    bool connected() const;
    void close();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fp8scope::live
