// Endpoints of the live stream: parsing, printing and the default local socket path.
#include "live_protocol.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace fp8scope::live {
namespace {

int parse_port(std::string_view text, std::string_view whole) {
    int port = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port < 0 || port > 65535)
        throw LiveError("bad endpoint '" + std::string(whole) + "': port '" + std::string(text) +
                        "' is not a number from 0 to 65535");
    return port;
}

Endpoint tcp(std::string_view host_port, std::string_view whole) {
    Endpoint e;
    e.kind = Endpoint::Kind::Tcp;
    const auto colon = host_port.rfind(':');
    std::string_view host = colon == std::string_view::npos ? std::string_view() : host_port.substr(0, colon);
    std::string_view port = colon == std::string_view::npos ? host_port : host_port.substr(colon + 1);
    if (colon != std::string_view::npos && host.empty())
        throw LiveError("bad endpoint '" + std::string(whole) + "': empty host");
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    e.host = host.empty() ? "127.0.0.1" : std::string(host);
    e.port = parse_port(port, whole);
    return e;
}

}  // namespace

std::string Endpoint::to_string() const {
    if (kind == Kind::Local) return "unix:" + path;
    const bool v6 = host.find(':') != std::string::npos;
    return "tcp:" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Endpoint parse_endpoint(std::string_view text) {
    if (text.empty()) throw LiveError("bad endpoint '': expected unix:PATH, tcp:PORT or HOST:PORT");
    if (text.starts_with("unix:")) {
        Endpoint e;
        e.path = std::string(text.substr(5));
        if (e.path.empty()) throw LiveError("bad endpoint '" + std::string(text) + "': empty socket path");
        return e;
    }
    if (text.starts_with("tcp:")) return tcp(text.substr(4), text);
    if (text.find('/') != std::string_view::npos) {
        Endpoint e;
        e.path = std::string(text);
        return e;
    }
    if (text.find(':') == std::string_view::npos)
        throw LiveError("bad endpoint '" + std::string(text) + "': expected unix:PATH, tcp:PORT or HOST:PORT");
    return tcp(text, text);
}

std::string default_socket_path() {
    std::string dir;
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg)
        dir = std::string(xdg) + "/fp8scope";
    else
        dir = "/tmp/fp8scope-" + std::to_string(::getuid());
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw LiveError("cannot create " + dir + ": " + std::strerror(errno));
    // An existing directory must be ours and closed to others: /tmp is shared.
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
        throw LiveError(dir + " is not a directory owned by this user");
    if ((st.st_mode & 0077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
        throw LiveError("cannot restrict " + dir + " to mode 0700: " + std::strerror(errno));
    // Several servers in one process each get their own socket.
    static std::atomic<int> serial{0};
    const int n = serial++;
    std::string path = dir + "/engine-" + std::to_string(::getpid());
    if (n) path += '-' + std::to_string(n);
    return path + ".sock";
}

}  // namespace fp8scope::live
