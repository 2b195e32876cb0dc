// POSIX socket helpers (live_socket.h).
#include "live_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace fp8scope::trace::live {

namespace {

std::runtime_error sys_error(const std::string& what) { return std::runtime_error(what + ": " + std::strerror(errno)); }

sockaddr_un unix_address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof a.sun_path)
        throw std::runtime_error("socket path '" + path + "' is empty or longer than " +
                                 std::to_string(sizeof a.sun_path - 1) + " characters");
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return a;
}

addrinfo* resolve(const std::string& host, int port, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    addrinfo* res = nullptr;
    std::string service = std::to_string(port);
    if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
        throw std::runtime_error("cannot resolve '" + host + "': " + gai_strerror(rc));
    return res;
}

}  // namespace

void Fd::reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

void set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

bool send_all(int fd, const void* data, std::size_t n) {
    auto* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= static_cast<std::size_t>(k);
    }
    return true;
}

Fd listen_unix(const std::string& path) {
    sockaddr_un a = unix_address(path);
    struct stat st{};
    if (lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) throw std::runtime_error("'" + path + "' exists and is not a socket");
        ::unlink(path.c_str());  // a stale socket of an earlier run
    }
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw sys_error("socket");
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) throw sys_error("bind " + path);
    if (::chmod(path.c_str(), 0600) < 0) throw sys_error("chmod " + path);
    if (::listen(fd.get(), 16) < 0) throw sys_error("listen " + path);
    return fd;
}

Fd listen_tcp(const std::string& host, int port, int& bound_port) {
    addrinfo* res = resolve(host, port, true);
    Fd fd;
    std::string err = "no address";
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
        if (!s.valid()) continue;
        int one = 1;
        setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(s.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(s.get(), 16) == 0) {
            fd = std::move(s);
            break;
        }
        err = std::strerror(errno);
    }
    freeaddrinfo(res);
    if (!fd.valid()) throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + err);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    return fd;
}

Fd connect_unix(const std::string& path) {
    sockaddr_un a = unix_address(path);
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw sys_error("socket");
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) throw sys_error("connect " + path);
    return fd;
}

Fd connect_tcp(const std::string& host, int port) {
    addrinfo* res = resolve(host, port, false);
    Fd fd;
    std::string err = "no address";
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
        if (s.valid() && ::connect(s.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
            fd = std::move(s);
            break;
        }
        err = std::strerror(errno);
    }
    freeaddrinfo(res);
    if (!fd.valid()) throw std::runtime_error("cannot connect to " + host + ":" + std::to_string(port) + ": " + err);
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

}  // namespace fp8scope::trace::live
