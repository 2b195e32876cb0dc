// Small POSIX socket helpers of the live stream: owned descriptors, listening and
// connecting on Unix-domain and TCP sockets, with errors that name the endpoint.
#pragma once

#include <string>
#include <utility>

namespace fp8scope::trace::live {

class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    ~Fd() { reset(); }
    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    void reset();

private:
    int fd_ = -1;
};

void set_nonblocking(int fd);
// Sends all of `n` bytes on a blocking socket; false when the peer is gone.
bool send_all(int fd, const void* data, std::size_t n);

// Listening sockets. The Unix one is created with mode 0600 (a stale socket file at the
// path is replaced); the TCP one reports the port it got when asked for port 0.
Fd listen_unix(const std::string& path);
Fd listen_tcp(const std::string& host, int port, int& bound_port);
// Connected, blocking sockets.
Fd connect_unix(const std::string& path);
Fd connect_tcp(const std::string& host, int port);

}  // namespace fp8scope::trace::live
