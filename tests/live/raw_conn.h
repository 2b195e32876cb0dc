// A hand-driven connection to a live server, for tests that send what a LiveClient
// never would (garbage, oversized lengths, an older version's Hello) or stop reading; or
// the engine's side of a connection a test accepted, to play an older engine.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "live_socket.h"
#include "live_wire.h"

namespace fp8scope::live::test {

struct RawConn {
    explicit RawConn(const Endpoint& e) : fd(net::connect_to(e, std::chrono::seconds(5))) {}
    explicit RawConn(net::Fd accepted) : fd(std::move(accepted)) {}  // a test's own engine side

    bool send(const std::string& bytes) { return net::send_all(fd.get(), bytes, std::chrono::seconds(5)); }
    void hello(const std::string& token) { send(wire::frame(wire::Hello{wire::kVersion, token})); }

    struct Got {
        wire::Msg type;
        std::string body;
    };
    // The next frame, or nothing when the connection closed or `timeout` passed.
    std::optional<Got> next(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            wire::FrameView f{};
            std::size_t used = 0;
            if (wire::split_frame(in, f, used) == wire::Split::Frame) {
                Got g{f.type, std::string(f.body)};
                in.erase(0, used);
                return g;
            }
            if (closed) return std::nullopt;
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return std::nullopt;
            pollfd p{fd.get(), POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            char buf[1 << 16];
            ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
            if (n <= 0) closed = true;
            else in.append(buf, static_cast<std::size_t>(n));
        }
    }
    // The next Error frame's code, skipping records.
    std::optional<wire::ErrorMsg> next_error(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
        while (auto g = next(timeout))
            if (g->type == wire::Msg::Error) return wire::decode_error(g->body);
        return std::nullopt;
    }
    // Reads until the peer closes; false if it is still open after `timeout`.
    bool closes_within(std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!closed && std::chrono::steady_clock::now() < deadline) {
            in.clear();
            next(std::chrono::milliseconds(100));
        }
        return closed;
    }

    net::Fd fd;
    std::string in;
    bool closed = false;
};

}  // namespace fp8scope::live::test
