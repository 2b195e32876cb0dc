// The engine's live server: one thread polls the listening socket and every client.
// publish() encodes a record once, appends it to the history a late client replays (a
// late op name to the metadata it is sent) and to each client's outgoing queue, and
// wakes the thread; it never touches a socket, so training never waits on a slow
// client. A client whose queue passes its limit, that sends garbage repeatedly or never
// completes the handshake is disconnected.
//
// Bounded for a long run and hostile local processes:
// - The history a late client replays is the last kHistorySteps steps (and at most
//   kHistoryBytes); the Start event is always kept, and once the history was trimmed a
//   late client's copy says which steps it lacks and where the trace file is.
// - Only authenticated clients count against kMaxClients. Connections still in the
//   handshake (at most kMaxPending, the oldest dropped first) have kHandshakeTimeout.
// - A pause whose clients all disconnected is undone: the run resumes, with an event.
#include "live_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "live_socket.h"
#include "live_wire.h"

namespace fp8scope::live {
namespace {

using Frame = std::shared_ptr<const std::string>;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kQueueLimit = 64u << 20;  // bytes a client may lag behind live records
constexpr std::size_t kMaxClients = 32;         // authenticated clients
constexpr std::size_t kMaxPending = 64;         // connections still in the handshake
constexpr std::int64_t kHistorySteps = 1000;    // steps a late client is sent
constexpr std::size_t kHistoryBytes = 16u << 20;
constexpr int kMaxStrikes = 3;                  // refused frames before a client is dropped
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
constexpr auto kLingerAfterError = std::chrono::seconds(1);
constexpr auto kDrainOnShutdown = std::chrono::milliseconds(1000);
constexpr std::size_t kReadChunk = 64u << 10;
constexpr std::size_t kReadPerWake = 4u << 20;  // fairness between clients

// Equal length and bytes, in time that depends on the expected token only.
bool token_matches(const std::string& expected, const std::string& given) {
    unsigned char diff = expected.size() != given.size();
    for (std::size_t i = 0; i < expected.size(); ++i)
        diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
    return diff == 0;
}

struct Client {
    net::Fd fd;
    std::string in;                 // received, not yet framed
    std::deque<Frame> out;          // guarded by Impl::mu
    std::size_t out_offset = 0;     // bytes of out.front() already sent
    std::size_t out_bytes = 0;
    std::size_t limit = kQueueLimit;
    bool authed = false;            // guarded by Impl::mu
    std::uint32_t version = wire::kVersion;  // of its Hello; guarded by Impl::mu
    bool dead = false;              // guarded by Impl::mu
    bool paused = false;            // its pause is in force (server thread only)
    bool closing = false;           // an error went out; close once it is sent
    int strikes = 0;
    Clock::time_point deadline;     // handshake, or linger after an error
};

// A record's frame, and where its body differs for clients of a version before
// `older_below` (wire::kStepMsVersion: a Step's step time in seconds; wire::kRankSumVersion:
// a RankStep without the FP8 sum figures), theirs.
struct Frames {
    Frame current, older;
    std::uint32_t older_below = wire::kStepMsVersion;
    const Frame& of(std::uint32_t version) const { return older && version < older_below ? older : current; }
};

Frame meta_frame(const trace::TraceMeta& meta, std::uint32_t version = wire::kVersion) {
    return std::make_shared<const std::string>(wire::frame(wire::MetaMsg{version, meta}));
}

}  // namespace

struct LiveServer::Impl {
    Endpoint endpoint;
    std::string token;
    trace::TraceMeta meta_record;  // with the op names published so far; guarded by mu
    Frame meta;                    // meta_record encoded; guarded by mu
    CommandHandler handler;
    net::Fd listener;
    net::Waker waker;

    mutable std::mutex mu;
    std::vector<std::unique_ptr<Client>> clients;
    std::deque<std::pair<std::int64_t, Frames>> history;  // (step, frames) of step, rank step and event records
    std::size_t history_bytes = 0;
    std::int64_t newest_step = INT64_MIN;
    std::optional<std::int64_t> trimmed_before;  // steps before it are no longer in history
    std::vector<trace::EventRecord> starts;      // Start events, kept whatever is trimmed
    std::vector<Frame> operands;         // of the newest capture step
    std::size_t operand_bytes = 0;
    std::int64_t operand_step = -1;

    std::atomic<bool> stopping{false};
    std::thread thread;

    void loop();
    void accept_clients();
    void read_client(Client& c);
    void handle(Client& c, const wire::FrameView& f);
    void refuse(Client& c, wire::ErrorCode code, const std::string& why, bool close);
    void welcome(Client& c, std::uint32_t version);
    void flush(Client& c);
    void drain(std::chrono::milliseconds limit);
    void enqueue_locked(Client& c, const Frame& f);
    void enqueue(Client& c, std::string bytes);
    // Queues `bytes` (`older` for clients of a version before `older_below`, when not
    // empty) for every client of version `since` or later; `keep` first files it, under the
    // same lock, where a client that connects later will find it.
    void publish(std::string bytes, const std::function<void(const Frames&)>& keep = {}, std::string older = {},
                 std::uint32_t older_below = wire::kStepMsVersion, std::uint32_t since = 0);
    void keep_history(std::int64_t step, const Frames& f);
    void keep_start(const trace::EventRecord& r);
    void resume_if_pausers_left(const std::vector<std::unique_ptr<Client>>& leaving);
    void keep_operand(const trace::OperandKey& key, const Frame& f);
    void keep_op_name(const trace::OpNameRecord& r);
};

void LiveServer::Impl::enqueue_locked(Client& c, const Frame& f) {
    if (c.dead) return;
    c.out.push_back(f);
    c.out_bytes += f->size();
    if (c.out_bytes > c.limit) c.dead = true;  // fell behind: dropped rather than slowing training
}

void LiveServer::Impl::enqueue(Client& c, std::string bytes) {
    auto f = std::make_shared<const std::string>(std::move(bytes));
    std::lock_guard lock(mu);
    enqueue_locked(c, f);
}

void LiveServer::Impl::publish(std::string bytes, const std::function<void(const Frames&)>& keep,
                               std::string older, std::uint32_t older_below, std::uint32_t since) {
    if (bytes.size() > wire::kMaxFrame + 4) return;  // no client would accept it
    Frames f{std::make_shared<const std::string>(std::move(bytes)),
             older.empty() ? nullptr : std::make_shared<const std::string>(std::move(older)), older_below};
    {
        std::lock_guard lock(mu);
        if (keep) keep(f);
        for (auto& c : clients)
            if (c->authed && c->version >= since) enqueue_locked(*c, f.of(c->version));
    }
    waker.wake();
}

void LiveServer::Impl::keep_history(std::int64_t step, const Frames& f) {
    history.emplace_back(step, f);
    history_bytes += f.current->size();
    newest_step = std::max(newest_step, step);
    // Saturating: a step near INT64_MIN keeps everything rather than wrapping.
    const std::int64_t oldest_kept = newest_step < INT64_MIN + kHistorySteps ? INT64_MIN : newest_step - kHistorySteps + 1;
    while (!history.empty() && (history.front().first < oldest_kept || history_bytes > kHistoryBytes)) {
        history_bytes -= history.front().second.current->size();
        history.pop_front();
        trimmed_before = history.empty() ? newest_step : history.front().first;
    }
}

void LiveServer::Impl::keep_start(const trace::EventRecord& r) {
    if (starts.size() < 16) starts.push_back(r);  // one per recording; the bound is for safety
}

void LiveServer::Impl::keep_operand(const trace::OperandKey& key, const Frame& f) {
    if (key.step < operand_step) return;
    if (key.step > operand_step) {
        operands.clear();
        operand_bytes = 0;
        operand_step = key.step;
    }
    operands.push_back(f);
    operand_bytes += f->size();
}

// A client that connects later gets the name in the metadata, as the file has it in
// /meta/ops. Names out of order would shift every later id, so they are refused.
void LiveServer::Impl::keep_op_name(const trace::OpNameRecord& r) {
    if (auto why = trace::check_record(meta_record, meta_record.ops.size(), r); !why.empty())
        throw std::invalid_argument(why);
    meta_record.ops.push_back(r.name);
    meta = meta_frame(meta_record);
}

void LiveServer::Impl::refuse(Client& c, wire::ErrorCode code, const std::string& why, bool close) {
    enqueue(c, wire::frame(wire::ErrorMsg{code, why}));
    if (close || ++c.strikes >= kMaxStrikes) {
        c.closing = true;
        c.deadline = Clock::now() + kLingerAfterError;
    }
}

// The handshake's answer: metadata, then the history, then live records (publish()
// appends behind these under the same lock, so nothing is missed or repeated).
void LiveServer::Impl::welcome(Client& c, std::uint32_t version) {
    std::unique_lock lock(mu);
    std::size_t authed = 0;
    for (const auto& other : clients) authed += other->authed && !other->dead && !other->closing;
    if (authed >= kMaxClients) {
        lock.unlock();
        return refuse(c, wire::ErrorCode::TooManyClients,
                      "too many clients (" + std::to_string(kMaxClients) + " are attached)", true);
    }
    c.authed = true;
    c.version = version;
    std::vector<Frame> start_frames;
    for (trace::EventRecord e : starts) {
        if (trimmed_before) {
            const bool has_file = e.detail.rfind(kTraceFileDetail, 0) == 0;
            e.detail = "the live history starts at step " + std::to_string(*trimmed_before) + " (the last " +
                       std::to_string(kHistorySteps) + " steps); " +
                       (has_file ? "earlier steps are in the " + e.detail : "earlier steps are not kept (no trace file)");
            if (e.detail.size() > std::size_t(trace::kEventDetailChars)) e.detail.resize(trace::kEventDetailChars);
        }
        start_frames.push_back(std::make_shared<const std::string>(wire::frame(e)));
    }
    std::size_t start_bytes = 0;
    for (const auto& f : start_frames) start_bytes += f->size();
    // A client of an older version gets the Meta and the Steps of its version; the other
    // messages are the same in every version it may speak.
    const Frame hello_meta = version == wire::kVersion ? meta : meta_frame(meta_record, version);
    c.limit = kQueueLimit + hello_meta->size() + start_bytes + history_bytes + operand_bytes;
    enqueue_locked(c, hello_meta);
    for (const auto& f : start_frames) enqueue_locked(c, f);
    for (const auto& [step, f] : history) enqueue_locked(c, f.of(version));
    for (const auto& f : operands) enqueue_locked(c, f);
}

void LiveServer::Impl::handle(Client& c, const wire::FrameView& f) {
    using wire::ErrorCode;
    using wire::Msg;
    if (!c.authed) {
        if (f.type != Msg::Hello) return refuse(c, ErrorCode::NotHello, "expected a hello first", true);
        wire::Hello hello;
        try {
            hello = wire::decode_hello(f.body);
        } catch (const wire::WireError& e) {
            return refuse(c, ErrorCode::Malformed, std::string("bad hello: ") + e.what(), true);
        }
        if (hello.version < wire::kOldestVersion || hello.version > wire::kVersion)
            return refuse(c, ErrorCode::BadVersion,
                          "protocol version " + std::to_string(hello.version) + " not supported; this engine speaks " +
                              std::to_string(wire::kOldestVersion) + " to " + std::to_string(wire::kVersion),
                          true);
        if (!token.empty() && !token_matches(token, hello.token))
            return refuse(c, ErrorCode::WrongToken, "wrong token", true);
        return welcome(c, hello.version);
    }
    if (f.type != Msg::Command)
        return refuse(c, ErrorCode::UnknownType,
                      "unexpected message type " + std::to_string(static_cast<int>(f.type)), false);
    wire::CommandMsg m;
    try {
        m = wire::decode_command(f.body);
    } catch (const wire::WireError& e) {
        return refuse(c, ErrorCode::Malformed, std::string("bad command: ") + e.what(), false);
    }
    CommandReply reply;
    try {
        reply = handler ? handler(m.command) : CommandReply{false, "this engine takes no commands"};
    } catch (const std::exception& e) {
        reply = {false, e.what()};
    }
    // Whose pause is in force: a resume from anyone lifts every pause.
    if (reply.ok && m.command.kind == CommandKind::Pause) c.paused = true;
    if (reply.ok && m.command.kind == CommandKind::Resume) {
        std::lock_guard lock(mu);
        for (auto& other : clients) other->paused = false;
    }
    enqueue(c, wire::frame(wire::ReplyMsg{m.id, reply}));
}

// A pause must not outlive every client that asked for it: nobody would be left to
// resume the run. Called on the server thread with the clients being dropped.
void LiveServer::Impl::resume_if_pausers_left(const std::vector<std::unique_ptr<Client>>& leaving) {
    bool left = false, remaining = false;
    for (const auto& c : leaving) left |= c->paused;
    {
        std::lock_guard lock(mu);
        for (const auto& c : clients) remaining |= c->paused;
    }
    if (!left || remaining || !handler) return;
    Command resume;
    resume.kind = CommandKind::Resume;
    resume.reason = "resumed: the client that paused the run disconnected";
    try {
        handler(resume);
    } catch (const std::exception&) {
        // The run may have ended; there is nothing to resume then.
    }
}

void LiveServer::Impl::read_client(Client& c) {
    std::size_t got = 0;
    char buf[kReadChunk];
    while (got < kReadPerWake && !c.closing) {
        ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
            std::lock_guard lock(mu);
            c.dead = true;  // closed by the client, or broken
            return;
        }
        c.in.append(buf, static_cast<std::size_t>(n));
        got += static_cast<std::size_t>(n);

        std::size_t pos = 0;
        while (!c.closing) {
            wire::FrameView f{};
            std::size_t used = 0;
            auto s = wire::split_frame(std::string_view(c.in).substr(pos), f, used);
            if (s == wire::Split::NeedMore) break;
            if (s == wire::Split::TooLarge) {
                // The stream cannot be resynchronised after a bogus length.
                refuse(c, wire::ErrorCode::FrameTooLarge,
                       "frame over " + std::to_string(wire::kMaxFrame) + " bytes", true);
                break;
            }
            if (s == wire::Split::Empty) {
                refuse(c, wire::ErrorCode::Malformed, "empty frame", false);
                pos += 4;
                continue;
            }
            handle(c, f);
            pos += used;
        }
        c.in.erase(0, pos);
    }
    if (c.closing) c.in.clear();
}

void LiveServer::Impl::flush(Client& c) {
    for (;;) {
        Frame front;
        std::size_t offset;
        {
            std::lock_guard lock(mu);
            if (c.dead || c.out.empty()) return;
            front = c.out.front();
            offset = c.out_offset;
        }
        long n = net::send_some(c.fd.get(), std::string_view(*front).substr(offset));
        std::lock_guard lock(mu);
        if (n < 0) {
            c.dead = true;
            return;
        }
        c.out_offset += static_cast<std::size_t>(n);
        if (c.out_offset < front->size()) return;  // the socket is full
        c.out_bytes -= front->size();
        c.out.pop_front();
        c.out_offset = 0;
    }
}

// The last records of a run (its end event) still reach clients that keep reading.
void LiveServer::Impl::drain(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    std::vector<pollfd> fds;
    while (Clock::now() < deadline) {
        fds.clear();
        for (auto& c : clients) {
            flush(*c);
            std::lock_guard lock(mu);
            if (!c->dead && !c->out.empty()) fds.push_back({c->fd.get(), POLLOUT, 0});
        }
        if (fds.empty()) return;
        ::poll(fds.data(), fds.size(), 20);
    }
}

void LiveServer::Impl::accept_clients() {
    for (;;) {
        int fd = net::accept_one(listener.get());
        if (fd < 0) return;
        auto c = std::make_unique<Client>();
        c->fd = net::Fd(fd);
        c->deadline = Clock::now() + kHandshakeTimeout;
        std::lock_guard lock(mu);
        // The client cap counts authenticated clients (welcome): connections that never
        // say hello cannot lock anyone out. Too many of those: the oldest goes.
        std::size_t pending = 0;
        Client* oldest = nullptr;
        for (auto& other : clients)
            if (!other->authed && !other->dead) {
                ++pending;
                if (!oldest || other->deadline < oldest->deadline) oldest = other.get();
            }
        if (pending >= kMaxPending && oldest) oldest->dead = true;
        clients.push_back(std::move(c));
    }
}

void LiveServer::Impl::loop() {
    std::vector<pollfd> fds;
    std::vector<Client*> polled;
    while (!stopping) {
        fds.assign({{waker.fd(), POLLIN, 0}, {listener.get(), POLLIN, 0}});
        polled.clear();
        {
            std::lock_guard lock(mu);
            for (auto& c : clients) {
                short ev = static_cast<short>((c->closing ? 0 : POLLIN) | (c->out.empty() ? 0 : POLLOUT));
                fds.push_back({c->fd.get(), ev, 0});
                polled.push_back(c.get());
            }
        }
        if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
        if (fds[0].revents) waker.drain();
        for (std::size_t i = 0; i < polled.size(); ++i)
            if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) read_client(*polled[i]);
        // Every queue is tried, not only those poll flagged: publish() may have added to it.
        for (Client* c : polled) flush(*c);

        const auto now = Clock::now();
        {
            std::lock_guard lock(mu);
            for (auto& c : clients) {
                if (c->closing && (c->out.empty() || now > c->deadline)) {
                    // Unread input would make close() reset the connection and lose the error.
                    ::shutdown(c->fd.get(), SHUT_WR);
                    char buf[4096];
                    for (int i = 0; i < 64 && ::recv(c->fd.get(), buf, sizeof buf, 0) > 0; ++i) {
                    }
                    c->dead = true;
                }
                if (!c->authed && now > c->deadline) c->dead = true;
            }
        }
        std::vector<std::unique_ptr<Client>> leaving;
        {
            std::lock_guard lock(mu);
            for (auto& c : clients)
                if (c->dead) leaving.push_back(std::move(c));
            std::erase_if(clients, [](const auto& c) { return !c; });
        }
        resume_if_pausers_left(leaving);
        if (fds[1].revents & POLLIN) accept_clients();
    }
}

LiveServer::LiveServer(const Endpoint& endpoint, std::string token, trace::TraceMeta meta, CommandHandler handler)
    : impl_(std::make_unique<Impl>()) {
    if (endpoint.kind == Endpoint::Kind::Tcp && token.empty())
        throw LiveError("a TCP endpoint needs a token (" + endpoint.to_string() + ")");
    impl_->endpoint = endpoint;
    impl_->token = std::move(token);
    impl_->meta_record = std::move(meta);
    impl_->meta = meta_frame(impl_->meta_record);
    if (impl_->meta->size() > wire::kMaxFrame + 4) throw LiveError("trace metadata over the 16 MiB frame limit");
    impl_->handler = std::move(handler);
    impl_->listener = net::listen_on(impl_->endpoint);
    impl_->thread = std::thread([this] { impl_->loop(); });
}

LiveServer::~LiveServer() {
    impl_->stopping = true;
    impl_->waker.wake();
    impl_->thread.join();
    impl_->drain(kDrainOnShutdown);
    impl_->clients.clear();
    impl_->listener.reset();
    if (impl_->endpoint.kind == Endpoint::Kind::Local) ::unlink(impl_->endpoint.path.c_str());
}

const Endpoint& LiveServer::endpoint() const { return impl_->endpoint; }
const std::string& LiveServer::token() const { return impl_->token; }

void LiveServer::publish(const trace::StepRecord& r) {
    impl_->publish(
        wire::frame(r), [this, &r](const Frames& f) { impl_->keep_history(r.step, f); },
        wire::frame(r, wire::kStepMsVersion - 1));
}
void LiveServer::publish(const trace::EventRecord& r) {
    // A client older than the world_changed kind gets it as a health event.
    std::string older;
    if (r.kind == trace::EventKind::WorldChanged) {
        trace::EventRecord health = r;
        health.kind = trace::EventKind::Health;
        older = wire::frame(health);
    }
    impl_->publish(
        wire::frame(r),
        [this, &r](const Frames& f) {
            if (r.kind == trace::EventKind::Start) impl_->keep_start(r);
            else impl_->keep_history(r.step, f);
        },
        std::move(older), wire::kWorldChangedVersion);
}
void LiveServer::publish(const trace::ScalingRecord& r) { impl_->publish(wire::frame(r)); }
void LiveServer::publish(const trace::OperandRecord& r) {
    impl_->publish(wire::frame(r), [this, &r](const Frames& f) { impl_->keep_operand(r.key, f.current); });
}
void LiveServer::publish(const trace::BlockMapRecord& r) { impl_->publish(wire::frame(r)); }
void LiveServer::publish(const trace::OpRecord& r) { impl_->publish(wire::frame(r)); }
void LiveServer::publish(const trace::OpNameRecord& r) {
    impl_->publish(wire::frame(r), [this, &r](const Frames&) { impl_->keep_op_name(r); });
}

void LiveServer::publish(const trace::RankStepRecord& r) {
    impl_->publish(
        wire::frame(r), [this, &r](const Frames& f) { impl_->keep_history(r.step, f); },
        wire::frame(r, wire::kRankSumVersion - 1), wire::kRankSumVersion);
}

void LiveServer::publish(const trace::KernelStepRecord& r) {
    impl_->publish(wire::frame(r), {}, {}, wire::kStepMsVersion, wire::kKernelStepVersion);
}

int LiveServer::clients() const {
    std::lock_guard lock(impl_->mu);
    int n = 0;
    for (const auto& c : impl_->clients) n += c->authed && !c->dead;
    return n;
}

}  // namespace fp8scope::live
