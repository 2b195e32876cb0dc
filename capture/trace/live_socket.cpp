// POSIX sockets for the live stream (see live_socket.h).
#include "live_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace fp8scope::live::net {
namespace {

// Connections the kernel queues before the server thread accepts them: room for a burst
// (the server itself bounds how many it keeps waiting for a hello).
constexpr int kBacklog = 128;


std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

sockaddr_un unix_address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof(a.sun_path))
        throw LiveError("socket path too long (" + std::to_string(path.size()) + " bytes, at most " +
                        std::to_string(sizeof(a.sun_path) - 1) + "): " + path);
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return a;
}

// A socket file nobody answers on is left over from a process that died.
bool stale_socket(const sockaddr_un& a) {
    struct stat st {};
    if (::lstat(a.sun_path, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
    Fd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) return false;
    return ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 && errno == ECONNREFUSED;
}

Fd listen_local(const Endpoint& e) {
    const sockaddr_un a = unix_address(e.path);
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throw LiveError(sys_error("socket"));
    if (stale_socket(a)) ::unlink(a.sun_path);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        if (errno == EADDRINUSE) throw LiveError("address in use: " + e.to_string());
        throw LiveError(sys_error("cannot bind " + e.to_string()));
    }
    if (::chmod(a.sun_path, 0600) != 0 || ::listen(fd.get(), kBacklog) != 0) {
        std::string why = sys_error("cannot listen on " + e.to_string());
        ::unlink(a.sun_path);
        throw LiveError(why);
    }
    return fd;
}

struct AddrInfo {
    addrinfo* list = nullptr;
    ~AddrInfo() {
        if (list) ::freeaddrinfo(list);
    }
};

AddrInfo resolve(const Endpoint& e, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    AddrInfo ai;
    const std::string port = std::to_string(e.port);
    if (int rc = ::getaddrinfo(e.host.c_str(), port.c_str(), &hints, &ai.list); rc != 0)
        throw LiveError("cannot resolve " + e.to_string() + ": " + ::gai_strerror(rc));
    return ai;
}

Fd listen_tcp(Endpoint& e) {
    AddrInfo ai = resolve(e, true);
    std::string why = "no address";
    for (addrinfo* p = ai.list; p; p = p->ai_next) {
        Fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, p->ai_protocol));
        if (!fd) continue;
        int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd.get(), p->ai_addr, p->ai_addrlen) != 0 || ::listen(fd.get(), kBacklog) != 0) {
            why = errno == EADDRINUSE ? "address in use" : std::strerror(errno);
            continue;
        }
        sockaddr_storage bound{};
        socklen_t len = sizeof bound;
        if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
            char port[16];
            if (::getnameinfo(reinterpret_cast<sockaddr*>(&bound), len, nullptr, 0, port, sizeof port,
                              NI_NUMERICSERV) == 0)
                e.port = std::atoi(port);
        }
        return fd;
    }
    throw LiveError(why + ": " + e.to_string());
}

// Waits for a non-blocking connect to finish; returns its errno (0: connected).
int finish_connect(int fd, std::chrono::milliseconds timeout) {
    pollfd p{fd, POLLOUT, 0};
    int rc;
    do rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
    while (rc < 0 && errno == EINTR);
    if (rc == 0) return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof err;
    if (rc < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
}

std::string connect_error(int err, const Endpoint& e) {
    if (err == ECONNREFUSED) return "connection refused: " + e.to_string();
    if (err == ENOENT) return "connection refused: " + e.to_string() + " (no such socket)";
    if (err == ETIMEDOUT) return "timed out connecting to " + e.to_string();
    return "cannot connect to " + e.to_string() + ": " + std::strerror(err);
}

}  // namespace

Fd listen_on(Endpoint& endpoint) {
    if (endpoint.kind == Endpoint::Kind::Local) return listen_local(endpoint);
    return listen_tcp(endpoint);
}

Fd connect_to(const Endpoint& e, std::chrono::milliseconds timeout) {
    if (e.kind == Endpoint::Kind::Local) {
        const sockaddr_un a = unix_address(e.path);
        Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd) throw LiveError(sys_error("socket"));
        // EAGAIN on a Unix socket means the listener's backlog is full (many connections
        // at once): unlike TCP's EINPROGRESS nothing is pending, so try again until the
        // server has accepted some or the timeout passes.
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        int err;
        while ((err = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 ? 0 : errno) == EAGAIN &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (err == EAGAIN) err = ETIMEDOUT;
        if (err == EINPROGRESS) err = finish_connect(fd.get(), timeout);
        if (err) throw LiveError(connect_error(err, e));
        return fd;
    }
    AddrInfo ai = resolve(e, false);
    int err = ECONNREFUSED;
    for (addrinfo* p = ai.list; p; p = p->ai_next) {
        Fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, p->ai_protocol));
        if (!fd) continue;
        err = ::connect(fd.get(), p->ai_addr, p->ai_addrlen) == 0 ? 0 : errno;
        if (err == EINPROGRESS) err = finish_connect(fd.get(), timeout);
        if (err == 0) return fd;
    }
    throw LiveError(connect_error(err, e));
}

int accept_one(int listen_fd) { return ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC); }

Waker::Waker() {
    int p[2];
    if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) throw LiveError(sys_error("pipe"));
    read_ = Fd(p[0]);
    write_ = Fd(p[1]);
}

void Waker::wake() {
    const char c = 1;
    [[maybe_unused]] auto n = ::write(write_.get(), &c, 1);  // a full pipe already wakes
}

void Waker::drain() {
    char buf[256];
    while (::read(read_.get(), buf, sizeof buf) > 0) {
    }
}

long send_some(int fd, std::string_view data) {
    for (;;) {
        ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n >= 0) return static_cast<long>(n);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -1;
    }
}

bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!data.empty()) {
        long n = send_some(fd, data);
        if (n < 0) return false;
        data.remove_prefix(static_cast<std::size_t>(n));
        if (data.empty()) break;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    }
    return true;
}

}  // namespace fp8scope::live::net
