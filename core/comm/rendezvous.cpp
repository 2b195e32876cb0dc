#include "comm/rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "comm/job_secret.h"

namespace fp8scope {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kMaxFrame = 64u << 20;  // far above any blob or record
constexpr const char* kWord = "fp8scope-rendezvous";
const std::string kHello = std::string(kWord) + " " + std::to_string(kRendezvousVersion);
// A joining rank sends its hello as soon as it connects: a connection silent for longer is
// not a rank. At most kMaxJoining wait for their hello at once (within the open files
// check_world_fits keeps spare), the longest waiting closed first.
constexpr auto kHelloWait = std::chrono::seconds(3);
constexpr std::size_t kMaxHello = 256;
constexpr std::size_t kMaxJoining = 32;

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(std::min<long long>(left, 1 << 30)) : 0;
}

// Waits for `events` on fd until the deadline; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
    pollfd p{fd, events, 0};
    for (;;) {
        const int rc = ::poll(&p, 1, ms_left(deadline));
        if (rc > 0) return true;
        if (rc == 0) return false;
        if (errno != EINTR) throw RendezvousError(sys_error("poll"));
    }
}

// `who` names the other end in messages ("rank 3", "rank 0 at host:port").
void send_all(int fd, std::string_view wire, Clock::time_point deadline, const std::string& who) {
    std::size_t sent = 0;
    while (sent < wire.size()) {
        if (!wait_for(fd, POLLOUT, deadline)) throw RendezvousError("timed out sending to " + who);
        const ssize_t k = ::send(fd, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (k < 0) throw RendezvousError(sys_error("lost the connection to " + who));
        sent += static_cast<std::size_t>(k);
    }
}

void send_frame(int fd, std::string_view data, Clock::time_point deadline, const std::string& who) {
    std::string frame(4, '\0');
    const auto n = static_cast<std::uint32_t>(data.size());
    for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    frame.append(data);
    send_all(fd, frame, deadline, who);
}

void recv_exact(int fd, char* out, std::size_t n, Clock::time_point deadline, const std::string& who) {
    std::size_t got = 0;
    while (got < n) {
        if (!wait_for(fd, POLLIN, deadline))
            throw RendezvousError(who + " sent nothing within the rendezvous timeout (hung or too slow)");
        const ssize_t k = ::recv(fd, out + got, n - got, MSG_DONTWAIT);
        if (k == 0) throw RendezvousError(who + " closed the connection (it exited or failed)");
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (k < 0) throw RendezvousError(sys_error("lost the connection to " + who));
        got += static_cast<std::size_t>(k);
    }
}

std::uint32_t frame_length(int fd, Clock::time_point deadline, const std::string& who) {
    unsigned char len[4];
    recv_exact(fd, reinterpret_cast<char*>(len), 4, deadline, who);
    const std::uint32_t n = len[0] | (len[1] << 8) | (len[2] << 16) | (std::uint32_t(len[3]) << 24);
    if (n > kMaxFrame) throw RendezvousError(who + " sent a frame of " + std::to_string(n) + " bytes (not a rendezvous peer?)");
    return n;
}

std::string recv_frame(int fd, Clock::time_point deadline, const std::string& who) {
    std::string data(frame_length(fd, deadline, who), '\0');
    recv_exact(fd, data.data(), data.size(), deadline, who);
    return data;
}

// Frames after the hello: the kind, then the data; the MAC of direction, sequence number
// and both follows them (the length is theirs).
void send_frame(RendezvousLink& link, char direction, char kind, std::string_view data, Clock::time_point deadline,
                const std::string& who) {
    std::string frame(4, '\0');
    const auto n = static_cast<std::uint32_t>(data.size() + 1);
    for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    frame += kind;
    frame.append(data);
    frame += frame_mac(link.key, direction, link.sent++, std::string_view(frame).substr(4));
    send_all(link.fd.get(), frame, deadline, who);
}

std::string recv_frame(RendezvousLink& link, char direction, Clock::time_point deadline, const std::string& who) {
    std::string data = recv_frame(link.fd.get(), deadline, who);
    char mac[kFrameMacBytes];
    recv_exact(link.fd.get(), mac, kFrameMacBytes, deadline, who);
    if (!same_mac(frame_mac(link.key, direction, link.received++, data), {mac, kFrameMacBytes}))
        throw RendezvousError("a frame from " + who + " failed its authentication (not sent by " + who +
                              " of this job: forged, replayed or corrupted on the way)");
    return data;
}

std::string rank_name(int r) { return "rank " + std::to_string(r); }

// The version a greeting or hello of another version names ("fp8scope-rendezvous 2 ..."),
// exactly as a number is written; -1 when it names this one or none.
int other_version(const std::string& text) {
    const std::string word = std::string(kWord) + " ";
    if (text.compare(0, word.size(), word) != 0) return -1;
    const std::size_t end = std::min(text.find(' ', word.size()), text.size());
    const std::string token = text.substr(word.size(), end - word.size());
    int v = -1;
    if (std::from_chars(token.data(), token.data() + token.size(), v).ptr != token.data() + token.size() ||
        token != std::to_string(v) || v < 0)
        return -1;
    return v == kRendezvousVersion ? -1 : v;
}

std::string versions_differ(const std::string& who, int theirs, const std::string& us) {
    return who + " speaks rendezvous version " + std::to_string(theirs) + ", " + us + " version " +
           std::to_string(kRendezvousVersion) + " (start every rank with the same fp8scope-engine build)";
}

constexpr char kDown = 'd', kUp = 'u';  // frames from rank 0, frames to it
// The kinds of frames after the hello (rendezvous.h).
constexpr char kData = 'D', kFault = 'F', kRecord = 'R', kNewWorld = 'N';
constexpr char kStatePart = 'S', kStateEnd = 'T', kHolds = 'A', kWontJoin = 'X', kJoined = 'J';
// The joiner's state travels in parts well under kMaxFrame (a large model's is gigabytes).
constexpr std::size_t kStatePartBytes = std::size_t(16) << 20;

// The new world as rank 0 tells it: the lost ranks, then the survivors' records, each
// count and length a 4-byte little-endian number.
void put_u32(std::string& out, std::size_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

std::uint32_t get_u32(std::string_view in, std::size_t& at) {
    if (in.size() < at + 4) throw RendezvousError("rank 0 sent a new world cut short");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(static_cast<unsigned char>(in[at + i])) << (8 * i);
    at += 4;
    return v;
}

std::string encode_new_world(const std::vector<int>& lost, const std::vector<std::string>& records) {
    std::string out;
    put_u32(out, lost.size());
    for (int r : lost) put_u32(out, std::size_t(r));
    put_u32(out, records.size());
    for (const std::string& r : records) put_u32(out, r.size()), out += r;
    return out;
}

void decode_new_world(std::string_view in, int world, std::vector<int>& lost, std::vector<std::string>& records) {
    std::size_t at = 0;
    const std::uint32_t n_lost = get_u32(in, at);
    if (n_lost >= std::uint32_t(world)) throw RendezvousError("rank 0 sent a new world without ranks");
    for (std::uint32_t i = 0; i < n_lost; ++i) lost.push_back(int(get_u32(in, at)));
    const std::uint32_t n = get_u32(in, at);
    if (n != std::uint32_t(world) - n_lost) throw RendezvousError("rank 0 sent a new world of the wrong size");
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint32_t len = get_u32(in, at);
        if (in.size() < at + len) throw RendezvousError("rank 0 sent a new world cut short");
        records.emplace_back(in.substr(at, len));
        at += len;
    }
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
    constexpr int kRuns = 8;
    std::string out;
    int runs = 0;
    std::size_t i = 0;
    for (; i < ranks.size() && runs < kRuns; ++runs) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) +
               (j > i ? "-" + std::to_string(ranks[j]) : std::string());
        i = j + 1;
    }
    if (i < ranks.size()) out += " and " + std::to_string(ranks.size() - i) + " more";
    return out;
}

namespace {

// Rank 0 holds a connection per rank: a world its open-file limit cannot hold fails now,
// naming the limit, not at the thousandth accept.
void check_world_fits(int world_size) {
    if (world_size > kMaxWorldSize)
        throw RendezvousError("world size " + std::to_string(world_size) + " is past the " +
                              std::to_string(kMaxWorldSize) + " ranks a rendezvous holds");
    rlimit files{};
    constexpr rlim_t kSpare = 64;  // the process's own files: logs, traces, the device
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
        rlim_t(world_size) + kSpare > files.rlim_cur)
        throw RendezvousError("rank 0 can open " + std::to_string(files.rlim_cur) + " files (ulimit -n), too few for " +
                              std::to_string(world_size) + " ranks' connections; raise it to " +
                              std::to_string(world_size + int(kSpare)) + " or more");
}

struct AddrInfo {
    addrinfo* list = nullptr;
    ~AddrInfo() {
        if (list) ::freeaddrinfo(list);
    }
};

bool is_loopback(const sockaddr* a) {
    if (a->sa_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family == AF_INET6) {
        const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
    }
    return false;
}

// Rank 0's listening socket: on MASTER_ADDR's own addresses when it names this machine's
// loopback (a job on one machine: nothing outside it can connect), else on every
// interface (the other ranks may reach rank 0 by any of its names).
Fd listen_for(const LaunchEnv& env, const std::string& where) {
    const std::string port = std::to_string(env.master_port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    AddrInfo ai;
    bool loopback = ::getaddrinfo(env.master_addr.c_str(), port.c_str(), &hints, &ai.list) == 0 && ai.list;
    for (addrinfo* a = ai.list; loopback && a; a = a->ai_next) loopback = is_loopback(a->ai_addr);
    if (!loopback) {
        AddrInfo any;
        hints.ai_flags = AI_PASSIVE;
        if (int rc = ::getaddrinfo(nullptr, port.c_str(), &hints, &any.list); rc != 0)
            throw RendezvousError("cannot listen on port " + port + ": " + ::gai_strerror(rc));
        std::swap(ai.list, any.list);
    }
    std::string why = "no address";
    for (addrinfo* a = ai.list; a; a = a->ai_next) {
        Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
        if (!fd) continue;
        const int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 1024) == 0) return fd;
        why = std::strerror(errno);
    }
    throw RendezvousError("rank 0 cannot listen on " + where + ": " + why +
                          (why == std::strerror(EADDRINUSE) ? " (another job on MASTER_PORT? pick another)" : ""));
}

// One connection attempt; an empty Fd when nobody listens yet.
Fd try_connect(const LaunchEnv& env, Clock::time_point deadline, const std::string& where) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    AddrInfo ai;
    if (int rc = ::getaddrinfo(env.master_addr.c_str(), std::to_string(env.master_port).c_str(), &hints, &ai.list);
        rc != 0)
        throw RendezvousError("cannot resolve MASTER_ADDR " + env.master_addr + ": " + ::gai_strerror(rc));
    for (addrinfo* a = ai.list; a; a = a->ai_next) {
        Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
        if (!fd) continue;
        if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
            if (errno != EINPROGRESS) continue;
            if (!wait_for(fd.get(), POLLOUT, deadline)) throw RendezvousError("timed out connecting to " + where);
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) continue;
        }
        const int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
    }
    return Fd();
}

std::string hello_text(int world_size, int rank) {
    return std::string(kHello) + " " + std::to_string(world_size) + " " + std::to_string(rank);
}

std::string hello(const LaunchEnv& env) { return hello_text(env.world_size, env.rank); }

}  // namespace

JoiningHello check_hello(const std::string& hello, int world_size, const std::string& secret,
                         const std::string& nonce0) {
    JoiningHello out;
    std::string& error = out.error;
    constexpr std::size_t kTail = 2 * (kNonceBytes + kMacBytes) + 2;
    const std::string h = hello.substr(0, hello.size() - std::min(kTail, hello.size()));
    const std::string tail = hello.substr(h.size());
    const bool whole = tail.size() == kTail;
    const std::string nonce = whole ? from_hex(tail.substr(1, 2 * kNonceBytes)) : "";
    const std::string proof = whole ? from_hex(tail.substr(2 + 2 * kNonceBytes)) : "";
    if (const int v = other_version(hello); v >= 0) {
        error = versions_differ("the joining rank", v, "rank 0");
        return out;
    }
    const std::string words = kHello + " ";
    int world = 0, rank = -1;
    bool ok = whole && nonce.size() == kNonceBytes && proof.size() == kMacBytes &&
              tail == " " + to_hex(nonce) + " " + to_hex(proof) && h.compare(0, words.size(), words) == 0;
    if (ok) {
        const char* end = h.data() + h.size();
        const auto [w, we] = std::from_chars(h.data() + words.size(), end, world);
        ok = we == std::errc{} && w != end && *w == ' ';
        if (ok) ok = std::from_chars(w + 1, end, rank).ec == std::errc{};
    }
    if (!ok || h != hello_text(world, rank)) {  // what the numbers read as, written back
        error = "not an fp8scope rendezvous hello";
        return out;
    }
    if (!same_mac(proof, hello_proof(secret, true, nonce0, nonce, world, rank)))
        error = "the hello does not prove the job's secret (set " + std::string(kJobSecretVar) +
                " to rank 0's on every rank)";
    else if (world != world_size)
        error = "world size " + std::to_string(world) + " differs from rank 0's " + std::to_string(world_size);
    else if (rank < 1 || rank >= world_size)
        error = "rank " + std::to_string(rank) + " is outside 1.." + std::to_string(world_size - 1);
    if (!error.empty()) return out;
    out.rank = rank;
    out.nonce = nonce;
    out.key = link_key(secret, nonce0, nonce, world, rank);
    return out;
}

namespace {

// A rank's side of the hello on `fd` to the hub `who` (rank 0 at MASTER_ADDR, or the new hub
// after rank 0 was lost): its link, and whether the hub answered "late" (the job is under
// way). Throws RendezvousError naming what failed.
RendezvousLink say_hello(Fd fd, const LaunchEnv& env, Clock::time_point deadline, const std::string& who, bool* late) {
    const std::string greeting = recv_frame(fd.get(), deadline, who);
    if (const int v = other_version(greeting); v >= 0)
        throw RendezvousError(versions_differ(who, v, "rank " + std::to_string(env.rank)));
    const std::string nonce0 = from_hex(greeting.substr(std::min(greeting.size(), kHello.size() + 1)));
    if (greeting.rfind(kHello + " ", 0) != 0 || nonce0.size() != kNonceBytes)
        throw RendezvousError(who + " did not greet as an fp8scope rendezvous (another program, or another "
                              "version of fp8scope, on MASTER_PORT?)");
    const std::string nonce = random_bytes(kNonceBytes);
    send_frame(fd.get(),
               hello(env) + " " + to_hex(nonce) + " " +
                   to_hex(hello_proof(env.job_secret, true, nonce0, nonce, env.world_size, env.rank)),
               deadline, who);
    const std::string answer = recv_frame(fd.get(), deadline, who);
    if (answer.rfind("error: ", 0) == 0)
        throw RendezvousError(who + " refused rank " + std::to_string(env.rank) + ": " + answer);
    const std::string proof0 = to_hex(hello_proof(env.job_secret, false, nonce0, nonce, env.world_size, env.rank));
    *late = answer == "late " + proof0;  // the job is under way: this rank joins it at a step boundary
    if (!*late && answer != "ok " + proof0)
        throw RendezvousError(who + " does not prove the job's secret (set " + std::string(kJobSecretVar) +
                              " to rank 0's on every rank)");
    return {std::move(fd), link_key(env.job_secret, nonce0, nonce, env.world_size, env.rank)};
}

// The numeric address of a connection's other end ("10.0.0.7"), as this end reaches it.
std::string peer_host(const Fd& fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    char host[NI_MAXHOST] = "";
    if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
        throw RendezvousError(sys_error("rank 0 cannot read a rank's address"));
    return host;
}

// A connection that has not yet sent its whole hello.
struct Joining {
    Fd fd;
    std::string hello;  // the frame so far, its length first
    Clock::time_point deadline;
    std::string nonce;  // sent with the greeting
};

// Reads what a joining connection has sent, never past its hello; true once it is done:
// a whole hello frame (then j.hello holds it), or a connection to drop (closed, an error,
// a frame longer than any hello: j.hello is then empty).
bool read_hello(Joining& j) {
    std::size_t want = 4 - std::min<std::size_t>(j.hello.size(), 4);
    if (j.hello.size() >= 4) {
        const auto* len = reinterpret_cast<const unsigned char*>(j.hello.data());
        const std::uint32_t n = len[0] | (len[1] << 8) | (len[2] << 16) | (std::uint32_t(len[3]) << 24);
        if (n > kMaxHello) return j.hello.clear(), true;
        want = 4 + n - j.hello.size();
        if (want == 0) return true;
    }
    char buf[kMaxHello + 4];
    const ssize_t k = ::recv(j.fd.get(), buf, want, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    if (k <= 0) return j.hello.clear(), true;
    j.hello.append(buf, std::size_t(k));
    return std::size_t(k) == want && read_hello(j);
}

// Answers a whole hello; 1 when it joined a rank.
int answer_hello(Joining& j, int world_size, const std::string& secret, std::vector<RendezvousLink>& peers) {
    JoiningHello h = check_hello(j.hello.substr(4), world_size, secret, j.nonce);
    const int r = h.rank;
    if (r >= 0 && peers[r].fd)
        h.error = "rank " + std::to_string(r) + " joined twice (two processes with the same RANK?)";
    try {
        if (!h.error.empty()) {
            send_frame(j.fd.get(), "error: " + h.error, j.deadline, "a joining process");
            return 0;
        }
        send_frame(j.fd.get(), "ok " + to_hex(hello_proof(secret, false, j.nonce, h.nonce, world_size, r)), j.deadline,
                   rank_name(r));
    } catch (const RendezvousError&) {
        return 0;  // gone before its answer: it did not join
    }
    peers[r] = {std::move(j.fd), std::move(h.key)};
    return 1;
}

// Whether the other end of a connection that sends nothing until asked has closed it.
bool hung_up(const Fd& fd) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    char byte = 0;
    return (p.revents & (POLLHUP | POLLERR)) || ::recv(fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// Greets the connections waiting on `listener`, each with a nonce of its own, to wait for
// their hellos until kHelloWait from now (or `deadline`, when sooner).
void accept_joining(const Fd& listener, std::vector<Joining>& joining, Clock::time_point deadline) {
    for (Fd fd; (fd = Fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)));) {
        if (joining.size() >= kMaxJoining) joining.erase(joining.begin());  // the longest silent goes
        const int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        Joining j{std::move(fd), {}, std::min(deadline, Clock::now() + kHelloWait), random_bytes(kNonceBytes)};
        try {
            send_frame(j.fd.get(), kHello + " " + to_hex(j.nonce), j.deadline, "a joining process");
        } catch (const RendezvousError&) {
            continue;  // gone already
        }
        joining.push_back(std::move(j));
    }
}

// Rank 0 takes every other rank's hello until all have joined or the deadline passes.
// `want`: the hellos to take (every other rank's when the job forms; the ranks above a new
// hub's after rank 0 was lost).
void join_all(const LaunchEnv& env, const Fd& listener, Clock::time_point deadline, std::chrono::milliseconds timeout,
              const std::string& where, std::vector<RendezvousLink>& peers, int want) {
    // Hellos are read side by side, each with its own short deadline: a connection that
    // sends nothing or half a hello (a port scan, a stuck process) is closed after
    // kHelloWait and holds up no rank, however many there are.
    std::vector<Joining> joining;
    int joined = 0;
    while (joined < want) {
        const auto now = Clock::now();
        if (now >= deadline) {
            std::vector<int> missing;
            for (int r = 1; r < env.world_size; ++r)
                if (!peers[r].fd) missing.push_back(r);
            throw RendezvousError("rendezvous on " + where + ": rank(s) " + rank_list(missing) + " of " +
                                  std::to_string(env.world_size) + " did not join within " +
                                  std::to_string(timeout.count()) + " ms");
        }
        std::erase_if(joining, [&](const Joining& j) { return j.deadline <= now; });
        std::vector<pollfd> fds{{listener.get(), POLLIN, 0}};
        auto wake = deadline;
        for (const Joining& j : joining) {
            fds.push_back({j.fd.get(), POLLIN, 0});
            wake = std::min(wake, j.deadline);
        }
        if (::poll(fds.data(), fds.size(), ms_left(wake)) < 0 && errno != EINTR)
            throw RendezvousError(sys_error("poll"));
        for (std::size_t i = 1; i < fds.size(); ++i) {
            if (!fds[i].revents) continue;
            Joining& j = joining[i - 1];
            if (!read_hello(j)) continue;
            if (j.hello.size() >= 4) joined += answer_hello(j, env.world_size, env.job_secret, peers);
            j.deadline = now;  // answered or refused: done with it
        }
        accept_joining(listener, joining, deadline);
    }
}

}  // namespace

int free_loopback_port() {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) throw RendezvousError(sys_error("cannot pick a port"));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw RendezvousError(sys_error("cannot pick a port"));
    return ntohs(a.sin_port);
}

Rendezvous::Rendezvous(const LaunchEnv& env, std::chrono::milliseconds timeout)
    : launch_world_(env.world_size), secret_(env.job_secret), env_(env), timeout_(timeout) {
    for (int r = 0; r < env.world_size; ++r) launch_ranks_.push_back(r);
    if (!env.distributed()) return;
    if (env.job_secret.size() < 16)
        throw RendezvousError("a job of " + std::to_string(env.world_size) + " ranks needs the job's secret: set " +
                              kJobSecretVar + " (at least 32 hex digits, the same on every rank)");
    const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
    const auto deadline = Clock::now() + timeout;
    if (env.rank != 0) {
        const std::string rank0 = "rank 0 at " + where;
        Fd fd;
        while (!(fd = try_connect(env, deadline, where))) {
            if (Clock::now() >= deadline)
                throw RendezvousError("rank " + std::to_string(env.rank) + " could not reach rank 0 at " + where +
                                      " within " + std::to_string(timeout.count()) + " ms (is rank 0 running?)");
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        peers_.push_back(say_hello(std::move(fd), env, deadline, rank0, &late_));
        return;
    }
    check_world_fits(env.world_size);
    listener_ = listen_for(env, where);
    peers_.resize(static_cast<std::size_t>(env.world_size));
    join_all(env_, listener_, deadline, timeout_, where, peers_, env.world_size - 1);
    late_hellos_ = std::thread([this] {
        try {
            serve_late_hellos();
        } catch (const std::exception&) {
            // Out of random bytes or file descriptors: no late rank can join; the job goes on.
        }
    });
}

Rendezvous::~Rendezvous() {
    closing_ = true;
    if (late_hellos_.joinable()) late_hellos_.join();
}

// As join_all, for the job's whole life: a hello that proves the secret is answered
// "late" (elastic) and waits among the candidates, or refused with why.
void Rendezvous::serve_late_hellos() {
    std::vector<Joining> joining;
    while (!closing_) {
        const auto now = Clock::now();
        std::erase_if(joining, [&](const Joining& j) { return j.deadline <= now; });
        std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
        auto wake = now + std::chrono::milliseconds(100);  // closing_ is looked at this often
        for (const Joining& j : joining) {
            fds.push_back({j.fd.get(), POLLIN, 0});
            wake = std::min(wake, j.deadline);
        }
        if (::poll(fds.data(), fds.size(), ms_left(wake)) < 0 && errno != EINTR) return;
        for (std::size_t i = 1; i < fds.size(); ++i) {
            if (!fds[i].revents) continue;
            Joining& j = joining[i - 1];
            if (!read_hello(j)) continue;
            const auto answer_by = std::exchange(j.deadline, now);  // answered or refused: done with it
            if (j.hello.size() < 4) continue;
            JoiningHello h = check_hello(j.hello.substr(4), launch_world_, secret_, j.nonce);
            if (h.error.empty() && !elastic_)
                h.error = "the job is under way and is not elastic: a rank cannot join it now (start the job with "
                          "--elastic, or restart all of it from a checkpoint)";
            if (h.error.empty()) {  // one waits per rank; one that gave up waiting makes room
                std::lock_guard lock(candidates_mu_);
                std::erase_if(candidates_, [&](const Candidate& c) { return c.rank == h.rank && hung_up(c.link.fd); });
                for (const Candidate& c : candidates_)
                    if (c.rank == h.rank)
                        h.error = "rank " + std::to_string(h.rank) + " is already waiting to join (two processes "
                                  "with the same RANK?)";
            }
            try {
                if (!h.error.empty()) {
                    send_frame(j.fd.get(), "error: " + h.error, answer_by, "a joining process");
                    continue;
                }
                send_frame(j.fd.get(),
                           "late " + to_hex(hello_proof(secret_, false, j.nonce, h.nonce, launch_world_, h.rank)),
                           answer_by, rank_name(h.rank));
            } catch (const RendezvousError&) {
                continue;  // gone before its answer
            }
            std::lock_guard lock(candidates_mu_);
            candidates_.push_back({h.rank, {std::move(j.fd), std::move(h.key)}, now});
        }
        accept_joining(listener_, joining, Clock::time_point::max());
    }
}

bool Rendezvous::exclude(const std::vector<int>& ranks) {
    for (int r : ranks)
        if (r <= 0 || r >= env_.world_size)
            throw std::invalid_argument("rendezvous: cannot exclude rank " + std::to_string(r) + " of " +
                                        std::to_string(env_.world_size) + " (rank 0 is the hub)");
    auto dropped = [&](int r) { return std::find(ranks.begin(), ranks.end(), r) != ranks.end(); };
    std::vector<int> launched;
    for (int r = 0; r < env_.world_size; ++r)
        if (!dropped(r)) launched.push_back(launch_ranks_.at(std::size_t(r)));
    launch_ranks_ = std::move(launched);
    if (dropped(env_.rank)) {
        peers_.clear();
        env_.world_size = 1, env_.rank = 0;
        return false;
    }
    int mine = 0;
    for (int r = 0; r < env_.rank; ++r) mine += !dropped(r);
    if (env_.rank == 0) {
        std::vector<RendezvousLink> kept;
        for (int r = 0; r < env_.world_size; ++r)
            if (!dropped(r)) kept.push_back(std::move(peers_[std::size_t(r)]));
        peers_ = std::move(kept);
    }
    env_.rank = mine;
    env_.world_size -= int(ranks.size());
    return true;
}

// A data frame from `peer` (rank 0: the rank; elsewhere 0). Elastic: on rank 0 a failed
// peer or its recovery record, elsewhere a fault frame, is a WorldFault.
std::string Rendezvous::recv_data(int peer, Clock::time_point deadline) {
    const bool hub = env_.rank == 0;
    const std::string who = rank_name(hub ? peer : 0);
    std::string frame;
    try {
        frame = recv_frame(peers_[std::size_t(peer)], hub ? kUp : kDown, deadline, who);
    } catch (const RendezvousError& e) {
        if (hub && elastic_) throw WorldFault(e.what(), {peer});
        hub_lost_ = !hub;  // rank 0 lost: an elastic job elects a new hub (agree_world)
        throw;
    }
    if (elastic_ && hub && !frame.empty() && frame[0] == kRecord) {
        recovering_.resize(std::size_t(env_.world_size));
        has_record_.resize(std::size_t(env_.world_size));
        recovering_[std::size_t(peer)] = frame.substr(1);
        has_record_[std::size_t(peer)] = true;
        throw WorldFault(who + " began a recovery: it lost a peer", {});
    }
    if (elastic_ && !hub && !frame.empty() && frame[0] == kFault)
        throw WorldFault("rank 0 began a recovery: the job lost a rank", {});
    if (frame.empty() || frame[0] != kData)
        throw RendezvousError(who + " sent a frame of another kind where data was due (ranks out of step)");
    frame.erase(0, 1);
    return frame;
}

void Rendezvous::send_data(int peer, std::string_view data, Clock::time_point deadline) {
    const bool hub = env_.rank == 0;
    try {
        send_frame(peers_[std::size_t(peer)], hub ? kDown : kUp, kData, data, deadline, rank_name(hub ? peer : 0));
    } catch (const RendezvousError& e) {
        if (hub && elastic_) throw WorldFault(e.what(), {peer});
        hub_lost_ = !hub;
        throw;
    }
}

std::string Rendezvous::broadcast(std::string_view blob) {
    if (!env_.distributed()) return std::string(blob);
    if (env_.rank != 0) return recv_data(0, Clock::now() + (elastic_ ? 2 : 1) * timeout_);
    const auto deadline = Clock::now() + timeout_;
    for (int r = 1; r < env_.world_size; ++r) send_data(r, blob, deadline);
    return std::string(blob);
}

std::vector<std::string> Rendezvous::all_gather(std::string_view mine) {
    if (!env_.distributed()) return {std::string(mine)};
    std::vector<std::string> all(static_cast<std::size_t>(env_.world_size));
    if (env_.rank != 0) {
        send_data(0, mine, Clock::now() + timeout_);
        const auto deadline = Clock::now() + (elastic_ ? 2 : 1) * timeout_;
        for (auto& s : all) s = recv_data(0, deadline);
        return all;
    }
    const auto deadline = Clock::now() + timeout_;
    all[0] = std::string(mine);
    for (int r = 1; r < env_.world_size; ++r) all[r] = recv_data(r, deadline);
    for (int r = 1; r < env_.world_size; ++r)
        for (const auto& s : all) send_data(r, s, deadline);
    return all;
}

Rendezvous::NewWorld Rendezvous::agree_world(const std::string& mine, const std::vector<int>& seen_lost) {
    NewWorld out;
    out.old_world = env_.world_size;
    if (!env_.distributed()) throw RendezvousError("a job of one rank has no peer to lose");
    const std::vector<int> before = launch_ranks_;
    std::vector<int> seen = seen_lost;
    // Rank 0's part, from a rank: its record, then the new world.
    auto told = [&] {
        const auto deadline = Clock::now() + 3 * timeout_;
        send_frame(peers_[0], kUp, kRecord, mine, deadline, "rank 0");
        for (;;) {  // what rank 0 sent before the round (data, its fault frame) is passed over
            const std::string f = recv_frame(peers_[0], kDown, deadline, "rank 0");
            if (f.empty() || f[0] != kNewWorld) continue;
            decode_new_world(std::string_view(f).substr(1), env_.world_size, out.lost, out.records);
            break;
        }
    };
    bool done = false;
    if (env_.rank != 0 && !hub_lost_) {
        try {
            told();
            done = true;
        } catch (const RendezvousError&) {
            out.lost.clear(), out.records.clear();  // rank 0 lost: the survivors meet again
        }
    }
    if (!done && env_.rank != 0) {
        seen = elect_hub();
        if (env_.rank != 0) told();
    }
    if (env_.rank == 0) {
        const std::size_t world = std::size_t(env_.world_size);
        recovering_.resize(world);
        has_record_.resize(world);
        std::vector<bool> lost(world, false);
        for (int r : seen)
            if (r > 0 && std::size_t(r) < world) lost[std::size_t(r)] = true;
        const auto deadline = Clock::now() + timeout_;
        for (std::size_t r = 1; r < world; ++r) {
            if (lost[r] || has_record_[r]) continue;
            try {
                send_frame(peers_[r], kDown, kFault, {}, deadline, rank_name(int(r)));
            } catch (const RendezvousError&) {
                lost[r] = true;
            }
        }
        recovering_[0] = mine;
        // A rank read after a hung one still gets a moment of its own, whose record may be
        // on its way.
        const auto grace = std::min<std::chrono::milliseconds>(timeout_ / 4, std::chrono::seconds(1));
        for (std::size_t r = 1; r < world; ++r) {
            const auto until = std::max(deadline, Clock::now() + grace);
            while (!lost[r] && !has_record_[r]) {
                try {
                    std::string f = recv_frame(peers_[r], kUp, until, rank_name(int(r)));
                    if (f.empty() || f[0] != kRecord) continue;  // data an exchange left behind
                    recovering_[r] = f.substr(1);
                    has_record_[r] = true;
                } catch (const RendezvousError&) {
                    lost[r] = true;
                }
            }
        }
        for (std::size_t r = 0; r < world; ++r) {
            if (lost[r]) out.lost.push_back(int(r));
            else out.records.push_back(std::move(recovering_[r]));
        }
        const std::string told = encode_new_world(out.lost, out.records);
        for (std::size_t r = 1; r < world; ++r)
            if (!lost[r]) send_frame(peers_[r], kDown, kNewWorld, told, deadline, rank_name(int(r)));
        recovering_.clear();
        has_record_.clear();
    }
    if (!out.lost.empty()) exclude(out.lost);
    out.lost.clear();  // in the numbering of `before`: the old hub too, when it was lost
    for (std::size_t r = 0; r < before.size(); ++r)
        if (std::find(launch_ranks_.begin(), launch_ranks_.end(), before[r]) == launch_ranks_.end())
            out.lost.push_back(int(r));
    return out;
}

void Rendezvous::share_roster() {
    if (!env_.distributed()) return;
    std::string port;
    if (env_.rank != 0) {
        LaunchEnv any = env_;
        any.master_port = 0;  // a port of the system's choosing, on the interfaces rank 0's is on
        own_listener_ = listen_for(any, "a port of its own");
        sockaddr_storage a{};
        socklen_t len = sizeof a;
        if (::getsockname(own_listener_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
            throw RendezvousError(sys_error("rank " + std::to_string(env_.rank) + " cannot read its own port"));
        port = std::to_string(ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&a)->sin6_port
                                                             : reinterpret_cast<sockaddr_in*>(&a)->sin_port));
    }
    const std::vector<std::string> ports = all_gather(port);
    std::string roster;  // rank 0: a line per rank, "host port" (rank 0's own line empty)
    if (env_.rank == 0)
        for (std::size_t r = 0; r < ports.size(); ++r)
            roster += (r ? peer_host(peers_[r].fd) + " " + ports[r] : "") + "\n";
    roster = broadcast(roster);
    roster_.assign(std::size_t(launch_world_), {});
    std::size_t at = 0;
    for (int r : launch_ranks_) {
        const std::size_t end = roster.find('\n', at);
        if (end == std::string::npos) throw RendezvousError("rank 0 sent a roster cut short");
        roster_[std::size_t(r)] = roster.substr(at, end - at);
        at = end + 1;
    }
}

std::vector<int> Rendezvous::elect_hub() {
    const int me = launch_ranks_.at(std::size_t(env_.rank));
    const int old_world = env_.world_size;
    if (roster_.empty())
        throw RendezvousError("rank 0 (the hub) was lost, and this rank, which joined late, knows no other rank's "
                              "address to meet again");
    const std::vector<int> rest(launch_ranks_.begin() + 1, launch_ranks_.end());  // as launched, without rank 0
    LaunchEnv as = env_;  // the hello names this rank as launched
    as.world_size = launch_world_, as.rank = me;
    peers_.clear();
    hub_lost_ = false;
    std::size_t k = 0;  // the candidates below the hub, which did not answer
    bool reached = false;
    for (; rest[k] != me; ++k) {
        const std::string who = "rank " + std::to_string(rest[k]) + " (as launched, the new hub)";
        const std::string& addr = roster_.at(std::size_t(rest[k]));
        try {
            LaunchEnv at = as;
            at.master_addr = addr.substr(0, addr.rfind(' '));
            at.master_port = addr.empty() ? 0 : std::atoi(addr.c_str() + addr.rfind(' ') + 1);
            const auto deadline = Clock::now() + 2 * timeout_;
            Fd fd = at.master_port > 0 ? try_connect(at, deadline, who) : Fd();
            if (!fd) throw RendezvousError(who + " does not listen (it exited)");
            bool late = false;
            peers_.push_back(say_hello(std::move(fd), as, deadline, who, &late));
            reached = true;
            break;
        } catch (const RendezvousError&) {
        }
    }
    const std::vector<int> after(rest.begin() + std::ptrdiff_t(k), rest.end());  // the new job's ranks, hub first
    launch_ranks_ = after;
    env_.world_size = int(after.size());
    env_.rank = int(std::find(after.begin(), after.end(), me) - after.begin());
    if (reached) return {};  // the hub tells who did not come
    // This rank is the hub: it takes the ranks above it.
    std::vector<RendezvousLink> links(static_cast<std::size_t>(launch_world_));
    try {
        join_all(as, own_listener_, Clock::now() + 2 * std::int64_t(k + 1) * timeout_, timeout_, "its own port", links,
                 int(after.size()) - 1);
    } catch (const RendezvousError&) {  // the ones that did not come are lost
    }
    peers_.clear();
    peers_.resize(after.size());
    std::vector<int> missing;
    for (std::size_t i = 1; i < after.size(); ++i) {
        if (links[std::size_t(after[i])].fd) peers_[i] = std::move(links[std::size_t(after[i])]);
        else missing.push_back(int(i));
    }
    // A majority of the job goes on; fewer (a second failure, or a rank rank 0 had already
    // dropped) end it: two groups must never both train.
    const int came = int(after.size() - missing.size());
    if (2 * came <= old_world) {
        peers_.resize(1);  // the ranks that came see their links close
        launch_ranks_ = {me};
        env_.world_size = 1;
        throw RendezvousError("rank 0 (the hub) was lost and only " + std::to_string(came) + " of the " +
                              std::to_string(old_world) + " ranks met again at rank " + std::to_string(me) +
                              " (as launched): not a majority");
    }
    return missing;
}

// --- late joins ----------------------------------------------------------------------

namespace {

std::string encode_ranks(const std::vector<int>& ranks) {
    std::string out;
    put_u32(out, ranks.size());
    for (int r : ranks) put_u32(out, std::size_t(r));
    return out;
}

std::vector<int> decode_ranks(std::string_view in, std::size_t& at, int limit) {
    const std::uint32_t n = get_u32(in, at);
    if (n > std::uint32_t(limit)) throw RendezvousError("rank 0 sent a list of " + std::to_string(n) + " ranks");
    std::vector<int> out;
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint32_t r = get_u32(in, at);
        if (r >= std::uint32_t(limit)) throw RendezvousError("rank 0 sent rank " + std::to_string(r));
        out.push_back(int(r));
    }
    return out;
}

}  // namespace

std::vector<int> Rendezvous::joiners_due() {
    std::vector<int> due;
    if (env_.rank != 0 || !elastic_) return due;
    std::lock_guard lock(candidates_mu_);
    const auto now = Clock::now();
    for (auto c = candidates_.begin(); c != candidates_.end();) {
        const bool held = std::find(launch_ranks_.begin(), launch_ranks_.end(), c->rank) != launch_ranks_.end();
        if (!held) {
            due.push_back(c->rank);
        } else if (now - c->since > timeout_) {
            try {
                send_frame(c->link, kDown, kWontJoin,
                           "rank " + std::to_string(c->rank) + " is in the job (two processes with the same RANK?)",
                           now + std::chrono::seconds(1), rank_name(c->rank));
            } catch (const RendezvousError&) {
            }
            c = candidates_.erase(c);
            continue;
        }
        ++c;
    }
    std::sort(due.begin(), due.end());
    return due;
}

Rendezvous::Admission Rendezvous::admit(const std::vector<int>& ranks, const std::function<std::string()>& state) {
    Admission out;
    out.old_world = env_.world_size;
    if (env_.rank != 0) {
        const auto deadline = Clock::now() + 3 * timeout_;
        for (;;) {
            const std::string f = recv_frame(peers_[0], kDown, deadline, "rank 0");
            if (f.empty()) continue;
            if (f[0] == kFault && elastic_) throw WorldFault("rank 0 began a recovery: the job lost a rank", {});
            if (f[0] != kJoined) throw RendezvousError("rank 0 sent a frame of another kind where the ranks that joined were due");
            std::size_t at = 1;
            out.joined = decode_ranks(f, at, launch_world_);
            break;
        }
        take_in(out.joined, nullptr);
        return out;
    }
    std::vector<Candidate> joining;
    {
        std::lock_guard lock(candidates_mu_);
        for (auto c = candidates_.begin(); c != candidates_.end();) {
            if (std::binary_search(ranks.begin(), ranks.end(), c->rank)) {
                joining.push_back(std::move(*c));
                c = candidates_.erase(c);
            } else {
                ++c;
            }
        }
    }
    std::sort(joining.begin(), joining.end(), [](const Candidate& a, const Candidate& b) { return a.rank < b.rank; });
    const auto deadline = Clock::now() + timeout_;
    std::vector<Candidate> ready;
    if (!joining.empty()) {
        const std::string blob = state();
        auto fail = [&](Candidate& c, const std::string& why) { out.failed.emplace_back(c.rank, why); };
        for (Candidate& c : joining) {
            const std::string who = "joining rank " + std::to_string(c.rank);
            try {
                for (std::size_t at = 0;; at += kStatePartBytes) {
                    const bool last = blob.size() - at <= kStatePartBytes;
                    send_frame(c.link, kDown, last ? kStateEnd : kStatePart,
                               std::string_view(blob).substr(at, kStatePartBytes), deadline, who);
                    if (last) break;
                }
            } catch (const RendezvousError& e) {
                fail(c, e.what());
                c.rank = -1;
            }
        }
        for (Candidate& c : joining) {
            if (c.rank < 0) continue;
            const std::string who = "joining rank " + std::to_string(c.rank);
            try {
                const std::string f = recv_frame(c.link, kUp, deadline, who);
                if (!f.empty() && f[0] == kHolds) ready.push_back(std::move(c));
                else if (!f.empty() && f[0] == kWontJoin) fail(c, who + " would not join: " + f.substr(1));
                else fail(c, who + " sent a frame of another kind where its word on the state was due");
            } catch (const RendezvousError& e) {
                fail(c, e.what());
            }
        }
    }
    for (const Candidate& c : ready) out.joined.push_back(c.rank);
    // The ranks that joined, then the job's ranks with them (as launched): a joiner's place.
    std::vector<int> after = launch_ranks_;
    after.insert(after.end(), out.joined.begin(), out.joined.end());
    std::sort(after.begin(), after.end());
    const std::string told = encode_ranks(out.joined) + encode_ranks(after);
    // Every rank is told before a failure to tell one is: they all go on in the same world.
    std::vector<int> lost;
    for (int r = 1; r < env_.world_size; ++r) {
        try {
            send_frame(peers_[std::size_t(r)], kDown, kJoined, told, deadline, rank_name(r));
        } catch (const RendezvousError& e) {
            if (!elastic_) throw;
            lost.push_back(launch_ranks_[std::size_t(r)]);
        }
    }
    for (Candidate& c : ready) {
        try {
            send_frame(c.link, kDown, kJoined, told, deadline, "joining rank " + std::to_string(c.rank));
        } catch (const RendezvousError&) {
            lost.push_back(c.rank);
        }
    }
    take_in(out.joined, &ready);
    if (!lost.empty()) {
        std::vector<int> now;  // in the new numbering
        for (int r : lost)
            now.push_back(int(std::find(launch_ranks_.begin(), launch_ranks_.end(), r) - launch_ranks_.begin()));
        std::sort(now.begin(), now.end());
        throw WorldFault("rank(s) " + rank_list(lost) + " (as launched) lost while the job took in " +
                             rank_list(out.joined),
                         now);
    }
    return out;
}

void Rendezvous::take_in(const std::vector<int>& joined, std::vector<Candidate>* links) {
    if (joined.empty()) return;
    const int me = launch_ranks_.empty() ? env_.rank : launch_ranks_.at(std::size_t(env_.rank));
    std::vector<int> ranks = launch_ranks_;
    for (int r : joined)
        if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
    std::sort(ranks.begin(), ranks.end());
    if (links) {  // rank 0: the links in the new order
        std::vector<RendezvousLink> peers(ranks.size());
        for (std::size_t i = 0; i < launch_ranks_.size(); ++i) {
            const auto at = std::find(ranks.begin(), ranks.end(), launch_ranks_[i]) - ranks.begin();
            peers[std::size_t(at)] = std::move(peers_[i]);
        }
        for (Candidate& c : *links) {
            const auto at = std::find(ranks.begin(), ranks.end(), c.rank) - ranks.begin();
            peers[std::size_t(at)] = std::move(c.link);
        }
        peers_ = std::move(peers);
    }
    launch_ranks_ = std::move(ranks);
    env_.world_size = int(launch_ranks_.size());
    env_.rank = int(std::find(launch_ranks_.begin(), launch_ranks_.end(), me) - launch_ranks_.begin());
}

std::string Rendezvous::late_state() {
    if (!late_) throw std::logic_error("rendezvous: late_state() on a rank that joined at the start");
    const auto deadline = Clock::now() + 4 * timeout_;
    std::string blob;
    for (;;) {
        const std::string f = recv_frame(peers_[0], kDown, deadline, "rank 0");
        if (f.empty()) continue;
        if (f[0] == kWontJoin) throw RendezvousError("rank 0 refused rank " + std::to_string(env_.rank) + ": " + f.substr(1));
        if (f[0] != kStatePart && f[0] != kStateEnd)
            throw RendezvousError("rank 0 sent a frame of another kind where the job's state was due");
        blob.append(f, 1);
        if (f[0] == kStateEnd) return blob;
    }
}

void Rendezvous::late_ready() {
    const int me = env_.rank;
    send_frame(peers_[0], kUp, kHolds, {}, Clock::now() + timeout_, "rank 0");
    const auto deadline = Clock::now() + 3 * timeout_;
    std::string f;
    do f = recv_frame(peers_[0], kDown, deadline, "rank 0");
    while (f.empty());
    if (f[0] != kJoined) throw RendezvousError("rank 0 sent a frame of another kind where the ranks that joined were due");
    std::size_t at = 1;
    const std::vector<int> joined = decode_ranks(f, at, launch_world_);
    std::vector<int> after = decode_ranks(f, at, launch_world_);
    if (std::find(joined.begin(), joined.end(), me) == joined.end())
        throw RendezvousError("rank 0 did not take rank " + std::to_string(me) + " in (it was too slow to answer)");
    if (!std::is_sorted(after.begin(), after.end()) || after.empty() || after[0] != 0)
        throw RendezvousError("rank 0 sent a job's ranks out of order");
    late_ = false;
    launch_ranks_ = std::move(after);
    env_.world_size = int(launch_ranks_.size());
    env_.rank = int(std::find(launch_ranks_.begin(), launch_ranks_.end(), me) - launch_ranks_.begin());
}

void Rendezvous::late_refuse(const std::string& why) {
    try {
        send_frame(peers_[0], kUp, kWontJoin, why, Clock::now() + timeout_, "rank 0");
    } catch (const RendezvousError&) {
    }
}

std::vector<std::string> Rendezvous::all_gather_same_size(std::string_view mine, std::string_view what) {
    std::vector<std::string> all = all_gather(mine);
    for (std::size_t r = 0; r < all.size(); ++r)
        if (all[r].size() != mine.size())
            throw RendezvousError(std::string(what) + ": rank " + std::to_string(r) + " sent " +
                                  std::to_string(all[r].size()) + " bytes, expected " + std::to_string(mine.size()) +
                                  " (ranks disagree on the array)");
    return all;
}

}  // namespace fp8scope
