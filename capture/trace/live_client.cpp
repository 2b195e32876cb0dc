// The GUI's live client: the handshake runs in the constructor, so a bad endpoint or
// token fails at once with a message; afterwards a reader thread decodes frames and
// calls the handlers, and send() waits for the reply carrying its command's id.
#include "live_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "live_socket.h"
#include "live_wire.h"

namespace fp8scope::live {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kConnectTimeout = std::chrono::seconds(5);

enum class Read { Data, Closed, Error, Timeout, Woken };

// Waits up to `ms` (-1: forever) for input on `fd` or a wake, then appends what is there.
Read read_some(int fd, int wake_fd, std::string& into, int ms) {
    pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int rc = ::poll(p, wake_fd >= 0 ? 2 : 1, ms);
    if (rc < 0) return errno == EINTR ? Read::Timeout : Read::Error;
    if (rc == 0) return Read::Timeout;
    if (wake_fd >= 0 && p[1].revents) return Read::Woken;
    char buf[64 << 10];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
        into.append(buf, static_cast<std::size_t>(n));
        return Read::Data;
    }
    if (n == 0) return Read::Closed;
    return errno == EAGAIN || errno == EINTR ? Read::Timeout : Read::Error;
}

}  // namespace

struct LiveClient::Impl {
    Endpoint endpoint;
    ClientHandlers handlers;
    net::Fd fd;
    net::Waker waker;
    std::string in;
    trace::TraceMeta meta;
    std::uint32_t version = wire::kVersion;  // the session's, once the engine answered
    std::thread reader;

    std::atomic<bool> open{false};
    std::atomic<bool> closed_by_user{false};
    std::mutex write_mu;
    std::mutex mu;
    std::condition_variable replied;
    std::map<std::uint32_t, CommandReply> replies;
    std::uint32_t next_id = 0;

    // False when the engine refused `version` as one it does not speak (throws otherwise).
    bool handshake(const std::string& token, std::uint32_t version);
    void run();
    bool dispatch(const wire::FrameView& f, std::string& why);
};

bool LiveClient::Impl::handshake(const std::string& token, std::uint32_t version) {
    const std::string where = endpoint.to_string();
    const auto deadline = Clock::now() + kConnectTimeout;
    if (!net::send_all(fd.get(), wire::frame(wire::Hello{version, token}), kConnectTimeout))
        throw LiveError("connection lost while greeting " + where);
    for (;;) {
        wire::FrameView f{};
        std::size_t used = 0;
        auto s = wire::split_frame(in, f, used);
        if (s == wire::Split::TooLarge || s == wire::Split::Empty)
            throw LiveError("not an fp8scope engine: " + where);
        if (s == wire::Split::Frame) {
            if (f.type == wire::Msg::Error) {
                wire::ErrorMsg e;
                try {
                    e = wire::decode_error(f.body);
                } catch (const wire::WireError&) {
                    throw LiveError("not an fp8scope engine: " + where);
                }
                if (e.code == wire::ErrorCode::WrongToken) throw LiveError("wrong token for " + where);
                if (e.code == wire::ErrorCode::BadVersion && version > wire::kOldestVersion) return false;
                throw LiveError("the engine at " + where + " refused the connection: " + e.message);
            }
            if (f.type != wire::Msg::Meta) throw LiveError("not an fp8scope engine: " + where);
            wire::MetaMsg m;
            try {
                m = wire::decode_meta(f.body);
            } catch (const wire::WireError& e) {
                throw LiveError("not an fp8scope engine: " + where + " (" + e.what() + ")");
            }
            if (m.version != version)
                throw LiveError("the engine at " + where + " speaks protocol version " + std::to_string(m.version) +
                                ", this client " + std::to_string(version));
            meta = std::move(m.meta);
            this->version = version;
            in.erase(0, used);
            return true;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) throw LiveError("timed out waiting for the engine at " + where);
        switch (read_some(fd.get(), -1, in, static_cast<int>(left.count()))) {
        case Read::Closed:
        case Read::Error:
            throw LiveError("not an fp8scope engine: " + where + " closed the connection");
        default:
            break;
        }
    }
}

// Returns false when the stream cannot go on; `why` says what went wrong.
bool LiveClient::Impl::dispatch(const wire::FrameView& f, std::string& why) {
    using wire::Msg;
    auto call = [](const auto& handler, const auto& record) {
        if (handler) handler(record);
    };
    try {
        switch (f.type) {
        case Msg::Step: call(handlers.on_step, wire::decode_step(f.body, version)); return true;
        case Msg::Event: call(handlers.on_event, wire::decode_event(f.body)); return true;
        case Msg::Scaling: call(handlers.on_scaling, wire::decode_scaling(f.body)); return true;
        case Msg::Operand: call(handlers.on_operand, wire::decode_operand(f.body)); return true;
        case Msg::BlockMap: call(handlers.on_blockmap, wire::decode_blockmap(f.body)); return true;
        case Msg::Op: call(handlers.on_op, wire::decode_op(f.body)); return true;
        case Msg::RankStep: call(handlers.on_rank_step, wire::decode_rank_step(f.body, version)); return true;
        case Msg::KernelStep: call(handlers.on_kernel_step, wire::decode_kernel_step(f.body)); return true;
        case Msg::OpName: {
            auto n = wire::decode_op_name(f.body);
            // Ids are handed out in order; any other would name the wrong ops from here on.
            if (auto bad = trace::check_record(meta, meta.ops.size(), n); !bad.empty()) {
                why = "malformed record from the engine: " + bad;
                return false;
            }
            meta.ops.push_back(n.name);
            call(handlers.on_op_name, n);
            return true;
        }
        case Msg::Reply: {
            auto m = wire::decode_reply(f.body);
            std::lock_guard lock(mu);
            replies[m.id] = std::move(m.reply);
            replied.notify_all();
            return true;
        }
        case Msg::Error: {
            // The engine refused something this client sent; the pending send() times out.
            auto e = wire::decode_error(f.body);
            if (e.code == wire::ErrorCode::FrameTooLarge) {
                why = "the engine refused a frame: " + e.message;
                return false;
            }
            return true;
        }
        default:
            why = "unexpected message type " + std::to_string(static_cast<int>(f.type)) + " from the engine";
            return false;
        }
    } catch (const wire::WireError& e) {
        why = std::string("malformed record from the engine: ") + e.what();
        return false;
    }
}

void LiveClient::Impl::run() {
    if (handlers.on_meta) handlers.on_meta(meta);
    std::string why;
    for (bool going = true; going;) {
        std::size_t pos = 0;
        for (;;) {
            wire::FrameView f{};
            std::size_t used = 0;
            auto s = wire::split_frame(std::string_view(in).substr(pos), f, used);
            if (s == wire::Split::NeedMore) break;
            if (s != wire::Split::Frame) {
                why = "corrupt stream from the engine";
                going = false;
                break;
            }
            pos += used;
            if (!dispatch(f, why)) {
                going = false;
                break;
            }
        }
        in.erase(0, pos);
        if (!going || closed_by_user) break;
        const std::size_t had = in.size();
        switch (read_some(fd.get(), waker.fd(), in, 500)) {
        case Read::Closed: why = "the engine closed the connection"; going = false; break;
        case Read::Error: why = std::string("connection lost: ") + std::strerror(errno); going = false; break;
        case Read::Woken: going = false; break;
        case Read::Data:
            if (handlers.coalesce_ms > 0 && in.size() - had < (64u << 10)) {  // drained: rest, a close still wakes it
                pollfd w{waker.fd(), POLLIN, 0};
                ::poll(&w, 1, handlers.coalesce_ms);
            }
            break;
        default: break;
        }
    }
    {
        std::lock_guard lock(mu);
        open = false;
        replied.notify_all();
    }
    if (!closed_by_user && handlers.on_closed) handlers.on_closed(why);
}

LiveClient::LiveClient(const Endpoint& endpoint, const std::string& token, ClientHandlers handlers)
    : impl_(std::make_unique<Impl>()) {
    impl_->endpoint = endpoint;
    impl_->handlers = std::move(handlers);
    impl_->fd = net::connect_to(endpoint, kConnectTimeout);
    // An engine of an older protocol refuses this client's version and closes: greet it
    // again in the oldest version this client reads.
    if (!impl_->handshake(token, wire::kVersion)) {
        impl_->in.clear();
        impl_->fd = net::connect_to(endpoint, kConnectTimeout);
        impl_->handshake(token, wire::kOldestVersion);
    }
    impl_->open = true;
    impl_->reader = std::thread([this] { impl_->run(); });
}

LiveClient::~LiveClient() {
    close();
    if (impl_->reader.joinable()) {
        if (impl_->reader.get_id() == std::this_thread::get_id())
            impl_->reader.detach();  // destroyed from a handler: must not be used after
        else
            impl_->reader.join();
    }
}

CommandReply LiveClient::send(const Command& command, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::uint32_t id;
    {
        std::lock_guard lock(impl_->mu);
        if (!impl_->open) return {false, "not connected"};
        id = ++impl_->next_id;
    }
    {
        std::lock_guard lock(impl_->write_mu);
        if (!net::send_all(impl_->fd.get(), wire::frame(wire::CommandMsg{id, command}), timeout))
            return {false, "could not send the command to " + impl_->endpoint.to_string()};
    }
    std::unique_lock lock(impl_->mu);
    bool got = impl_->replied.wait_until(lock, deadline, [&] { return impl_->replies.count(id) || !impl_->open; });
    auto it = impl_->replies.find(id);
    if (it == impl_->replies.end()) {
        if (!got) return {false, "no reply from the engine within " + std::to_string(timeout.count()) + " ms"};
        return {false, "the connection to the engine closed"};
    }
    CommandReply reply = std::move(it->second);
    impl_->replies.erase(it);
    return reply;
}

bool LiveClient::connected() const { return impl_->open; }

void LiveClient::close() {
    if (impl_->closed_by_user.exchange(true)) return;
    impl_->waker.wake();
    ::shutdown(impl_->fd.get(), SHUT_RDWR);
    if (impl_->reader.joinable() && impl_->reader.get_id() != std::this_thread::get_id()) impl_->reader.join();
    impl_->open = false;
}

}  // namespace fp8scope::live
