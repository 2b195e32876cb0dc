// POSIX socket plumbing shared by the live server and client: an owning descriptor,
// listening and connecting on Unix-domain and TCP endpoints, writes without SIGPIPE.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "live_protocol.h"
#include "util/fd.h"

namespace fp8scope::live::net {

using fp8scope::Fd;

// A non-blocking listening socket. Local: mode 0600; a stale socket file (nobody
// answers) is replaced, a live one is "address in use". Tcp: port 0 picks a free port,
// written back into `endpoint`. Throws LiveError.
Fd listen_on(Endpoint& endpoint);
// A connected socket, non-blocking once connected. Throws LiveError: "connection refused:
// <endpoint>", "timed out connecting to <endpoint>", ...
Fd connect_to(const Endpoint& endpoint, std::chrono::milliseconds timeout);
// Accepts one pending connection (non-blocking, close-on-exec); -1 when none.
int accept_one(int listen_fd);

// A self-pipe that wakes a poll() loop from another thread.
class Waker {
public:
    Waker();
    int fd() const { return read_.get(); }
    void wake();   // never blocks
    void drain();

private:
    Fd read_, write_;
};

// Sends as much as the socket takes now. Returns bytes written (0 when it would block),
// -1 on a broken connection.
long send_some(int fd, std::string_view data);
// Sends all of `data`, waiting up to `timeout` for room. False on error or timeout.
bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout);

}  // namespace fp8scope::live::net
