// The live server's I/O thread: poll() over the listening socket, a wake-up pipe and the
// clients. Records are encoded once and appended to each client's outgoing queue; a
// queue past its limit drops that client. Commands are decoded, handed to the handler
// and answered; anything malformed is answered with an error and changes nothing.
#include "live_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <list>
#include <mutex>
#include <random>
#include <thread>

#include "live_socket.h"

namespace fp8scope::trace::live {

namespace {

constexpr auto kAuthTimeout = std::chrono::seconds(10);

std::string random_token() {
    std::random_device rd;
    static const char* hex = "0123456789abcdef";
    std::string t;
    for (int i = 0; i < 32; ++i) t += hex[rd() & 15];
    return t;
}

// Same time for every wrong token of the same length.
bool token_equal(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
    return d == 0;
}

struct Client {
    Fd fd;
    bool authed = false;
    bool closing = false;  // close once the queue is sent
    std::chrono::steady_clock::time_point connected = std::chrono::steady_clock::now();
    FrameReader in;
    std::deque<std::vector<std::uint8_t>> out;
    std::size_t out_bytes = 0, out_pos = 0;
};

}  // namespace

Endpoint parse_endpoint(const std::string& spec) {
    Endpoint e;
    auto bad = [&](const std::string& why) {
        return std::invalid_argument("--listen '" + spec + "': " + why +
                                     " (expected unix, unix:PATH, tcp:PORT or ADDR:PORT)");
    };
    auto port_of = [&](const std::string& s) {
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 5) throw bad("bad port");
        int p = std::stoi(s);
        if (p > 65535) throw bad("port past 65535");
        return p;
    };
    if (spec.empty() || spec == "unix") {
        e.path = default_socket_path();
    } else if (spec.rfind("unix:", 0) == 0) {
        e.path = spec.substr(5);
        if (e.path.empty()) throw bad("empty path");
    } else if (spec.rfind("tcp:", 0) == 0) {
        e.tcp = true;
        e.host = "127.0.0.1";
        e.port = port_of(spec.substr(4));
    } else {
        auto colon = spec.rfind(':');
        if (colon == std::string::npos || colon == 0) throw bad("no address");
        e.tcp = true;
        e.host = spec.substr(0, colon);
        if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']') e.host = e.host.substr(1, e.host.size() - 2);
        e.port = port_of(spec.substr(colon + 1));
    }
    return e;
}

std::string default_socket_path() {
    std::string dir;
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    struct stat st{};
    if (xdg && *xdg && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode)) dir = std::string(xdg) + "/fp8scope";
    else dir = "/tmp/fp8scope-" + std::to_string(getuid());
    if (mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) throw std::runtime_error("cannot create " + dir);
    // An existing directory must be ours and closed to others, or anyone could swap the socket.
    if (lstat(dir.c_str(), &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0)
        throw std::runtime_error(dir + " is not a directory only this user can use (want mode 0700)");
    return dir + "/engine-" + std::to_string(getpid()) + ".sock";
}

struct LiveServer::Impl {
    TraceMeta meta;
    ServerOptions options;
    CommandHandler handler;
    Endpoint endpoint;
    Fd listener, wake_read, wake_write;
    std::thread thread;

    std::mutex mu;  // inbox, overflow, meta.ops
    std::deque<Record> inbox;
    bool overflow = false;
    std::atomic<int> authed{0};
    std::atomic<bool> stopping{false};
    std::list<Client> clients;  // I/O thread only

    void wake() {
        char c = 1;
        [[maybe_unused]] auto n = ::write(wake_write.get(), &c, 1);
    }

    void queue(Client& c, std::vector<std::uint8_t> frame) {
        c.out_bytes += frame.size();
        c.out.push_back(std::move(frame));
        if (c.out_bytes > options.client_queue_bytes) drop(c);
    }
    void reply(Client& c, bool ok, const std::string& error) { queue(c, encode_frame(MsgType::Reply, encode_reply({ok, error}))); }
    void drop(Client& c) {
        if (c.authed) --authed;
        c.authed = false;
        c.fd.reset();
    }
    void send_meta(Client& c) {
        std::vector<std::uint8_t> payload;
        {
            std::lock_guard lock(mu);
            payload = encode_meta(meta);
        }
        c.authed = true;
        ++authed;
        queue(c, encode_frame(MsgType::Meta, payload));
    }

    void on_frame(Client& c, const Frame& f) {
        if (!c.authed) {
            if (f.type != MsgType::Auth) {
                reply(c, false, "authentication required: the first message must be the token");
                c.closing = true;
                return;
            }
            std::string token;
            try {
                token = decode_auth(f.payload);
            } catch (const ProtocolError& e) {
                token.clear();
            }
            if (!token_equal(token, options.token)) {
                reply(c, false, "authentication failed: wrong token");
                c.closing = true;
                return;
            }
            send_meta(c);
            return;
        }
        if (f.type != MsgType::Command) {
            reply(c, false, "unexpected message type " + std::to_string(static_cast<int>(f.type)));
            return;
        }
        Command cmd;
        try {
            cmd = decode_command(f.payload);
        } catch (const ProtocolError& e) {
            reply(c, false, std::string("malformed command: ") + e.what());
            return;
        }
        try {
            handler(cmd);
            reply(c, true, "");
        } catch (const std::exception& e) {
            reply(c, false, std::string(command_name(cmd.kind)) + ": " + e.what());
        }
    }

    void read_client(Client& c) {
        char buf[65536];
        for (;;) {
            ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
            if (n > 0) {
                c.in.feed(buf, static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            if (n < 0 && errno == EINTR) continue;
            drop(c);  // closed or failed
            return;
        }
        try {
            while (!c.closing && c.fd.valid())
                if (auto f = c.in.next()) on_frame(c, *f);
                else break;
        } catch (const ProtocolError& e) {  // a bad length: the stream cannot be resynchronised
            reply(c, false, std::string("protocol error: ") + e.what());
            c.closing = true;
        }
    }

    void write_client(Client& c) {
        while (c.fd.valid() && !c.out.empty()) {
            auto& front = c.out.front();
            ssize_t n = ::send(c.fd.get(), front.data() + c.out_pos, front.size() - c.out_pos, MSG_NOSIGNAL);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                drop(c);
                return;
            }
            c.out_pos += static_cast<std::size_t>(n);
            if (c.out_pos == front.size()) {
                c.out_bytes -= front.size();
                c.out.pop_front();
                c.out_pos = 0;
            }
        }
        if (c.closing && c.out.empty()) drop(c);
    }

    void broadcast() {
        std::deque<Record> batch;
        bool lost = false;
        {
            std::lock_guard lock(mu);
            batch.swap(inbox);
            lost = std::exchange(overflow, false);
        }
        if (lost)  // these clients missed records: they must reconnect (and re-read the file)
            for (auto& c : clients)
                if (c.authed) drop(c);
        for (const auto& r : batch) {
            std::vector<std::uint8_t> frame = encode_frame(MsgType::Record, encode_record(r));
            for (auto& c : clients)
                if (c.authed && !c.closing && c.fd.valid()) queue(c, frame);
        }
    }

    void accept_clients() {
        for (;;) {
            int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;
            clients.emplace_back();
            Client& c = clients.back();
            c.fd = Fd(fd);
            if (!endpoint.tcp) send_meta(c);  // the socket's mode is the access control
        }
    }

    void run() {
        while (!stopping) {
            std::vector<pollfd> fds{{listener.get(), POLLIN, 0}, {wake_read.get(), POLLIN, 0}};
            for (auto& c : clients)
                fds.push_back({c.fd.get(), static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
            if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
            if (fds[1].revents & POLLIN) {
                char buf[256];
                while (::read(wake_read.get(), buf, sizeof buf) > 0) {
                }
            }
            broadcast();
            std::size_t i = 2;
            auto now = std::chrono::steady_clock::now();
            for (auto& c : clients) {
                short ev = i < fds.size() ? fds[i++].revents : 0;
                if (!c.fd.valid()) continue;
                if (ev & (POLLIN | POLLHUP | POLLERR)) read_client(c);
                if (c.fd.valid() && !c.authed && !c.closing && now - c.connected > kAuthTimeout) {
                    reply(c, false, "authentication timed out");
                    c.closing = true;
                }
                if (c.fd.valid()) write_client(c);
            }
            if (fds[0].revents & POLLIN) accept_clients();
            clients.remove_if([](const Client& c) { return !c.fd.valid(); });
        }
        for (auto& c : clients) drop(c);
        clients.clear();
    }
};

LiveServer::LiveServer(const TraceMeta& meta, ServerOptions options, CommandHandler handler)
    : impl_(std::make_unique<Impl>()) {
    Impl& d = *impl_;
    d.meta = meta;
    d.options = std::move(options);
    d.handler = std::move(handler);
    d.endpoint = parse_endpoint(d.options.listen);
    if (d.endpoint.tcp) {
        if (d.options.token.empty()) d.options.token = random_token();
        int port = 0;
        d.listener = listen_tcp(d.endpoint.host, d.endpoint.port, port);
        d.endpoint.port = port;
    } else {
        d.options.token.clear();
        d.listener = listen_unix(d.endpoint.path);
    }
    set_nonblocking(d.listener.get());
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0) throw std::runtime_error("pipe failed");
    d.wake_read = Fd(p[0]);
    d.wake_write = Fd(p[1]);
    d.thread = std::thread([&d] { d.run(); });
}

LiveServer::~LiveServer() { stop(); }

void LiveServer::stop() {
    Impl& d = *impl_;
    if (!d.thread.joinable()) return;
    d.stopping = true;
    d.wake();
    d.thread.join();
    d.listener.reset();
    if (!d.endpoint.tcp) ::unlink(d.endpoint.path.c_str());
}

void LiveServer::write(Record record) {
    Impl& d = *impl_;
    if (auto* n = std::get_if<OpNameRecord>(&record)) {  // later clients get it in their meta
        std::lock_guard lock(d.mu);
        d.meta.ops.push_back(n->name);
    }
    if (d.authed.load(std::memory_order_relaxed) == 0) return;
    bool was_empty = false;
    {
        std::lock_guard lock(d.mu);
        if (d.inbox.size() >= d.options.record_queue) {
            d.overflow = true;
            return;
        }
        was_empty = d.inbox.empty();
        d.inbox.push_back(std::move(record));
    }
    if (was_empty) d.wake();
}

std::string LiveServer::address() const {
    const Endpoint& e = impl_->endpoint;
    if (!e.tcp) return "unix:" + e.path;
    return "tcp:" + (e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}
const std::string& LiveServer::token() const { return impl_->options.token; }
int LiveServer::clients() const { return impl_->authed.load(); }

}  // namespace fp8scope::trace::live
