// The engine's side of the live stream: serves records to any number of clients and
// hands their commands to the trainer. Publishing never blocks training: each client has
// a bounded queue, and a client that falls behind or misbehaves is disconnected.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "live_protocol.h"
#include "trace_records.h"

namespace fp8scope::live {

// The Start event's detail of a run that writes a trace file: this, then the path.
inline constexpr std::string_view kTraceFileDetail = "trace file ";

class LiveServer {
public:
    // Called on the server's thread for each valid command; must be thread-safe (the
    // trainer's control API is). Its reply goes back to the client.
    using CommandHandler = std::function<CommandReply(const Command&)>;

    // Binds and starts serving. TCP needs a non-empty token; a Local socket may have one.
    // Throws LiveError (address in use, bad path, TCP without token, ...).
    LiveServer(const Endpoint& endpoint, std::string token, trace::TraceMeta meta,
               CommandHandler handler);
    ~LiveServer();
    LiveServer(const LiveServer&) = delete;
    LiveServer& operator=(const LiveServer&) = delete;

    const Endpoint& endpoint() const;  // with the bound port when 0 was asked
    const std::string& token() const;

    // A client that connects late first receives the metadata (with the op names
    // published so far), the Start event, the step and event records of the last
    // 1000 steps and the newest capture step's operand records, then new records. When
    // older steps were dropped, its Start event's detail says from which step it has
    // them and, when the run writes a trace file (a Start detail of kTraceFileDetail +
    // path), that the rest is there.
    void publish(const trace::StepRecord& r);
    void publish(const trace::EventRecord& r);
    void publish(const trace::ScalingRecord& r);
    void publish(const trace::OperandRecord& r);
    void publish(const trace::BlockMapRecord& r);
    void publish(const trace::OpRecord& r);
    // An op name that appeared after the start, before the first OpRecord using it.
    // Throws std::invalid_argument unless its id is the next one (check_record).
    void publish(const trace::OpNameRecord& r);
    // Kept with the step records: a late client gets the ranks of the steps it is sent.
    void publish(const trace::RankStepRecord& r);
    // Sent to clients of version 9 and later; not kept for late clients (as op records).
    void publish(const trace::KernelStepRecord& r);

    int clients() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fp8scope::live
