// The GUI side of the live stream: connects to an engine's LiveServer, receives the
// TraceMeta and then records (the same structs a trace file gives), and sends control
// commands. Not thread-safe: one thread (the GUI's live worker) owns a client.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>

#include "live_protocol.h"
#include "live_socket.h"

namespace fp8scope::trace::live {

class LiveError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class LiveClient {
public:
    // `address`: what the server printed ("unix:PATH" or "tcp:HOST:PORT"). TCP needs the
    // token. Throws LiveError: cannot connect, wrong token, no meta within `timeout`.
    LiveClient(const std::string& address, const std::string& token = "",
               std::chrono::milliseconds timeout = std::chrono::seconds(10));

    const TraceMeta& meta() const { return meta_; }
    // The next record, waiting up to `timeout`; nullopt when none came. Throws LiveError
    // when the connection ended or the server sent something malformed.
    std::optional<Record> next(std::chrono::milliseconds timeout);
    // Sends a command and waits for its reply (records arriving meanwhile are kept for
    // next()). Throws LiveError when no reply comes within `timeout`.
    Reply command(const Command& command, std::chrono::milliseconds timeout = std::chrono::seconds(10));
    // Sends raw bytes: for tests of the server's handling of bad input.
    void send_raw(const void* data, std::size_t n);
    // Waits up to `timeout` for the next reply, keeping records for next().
    std::optional<Reply> next_reply(std::chrono::milliseconds timeout);

private:
    // Reads what is there (waiting up to `timeout` for the first bytes); false on timeout.
    bool pump(std::chrono::milliseconds timeout);
    void handle(const Frame& f);

    Fd fd_;
    FrameReader in_;
    TraceMeta meta_;
    bool have_meta_ = false;
    std::deque<Record> records_;
    std::deque<Reply> replies_;
};

}  // namespace fp8scope::trace::live
