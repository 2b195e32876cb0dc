// LiveClient: blocking reads with poll() timeouts; every record is checked against the
// meta before it is handed on.
#include "live_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace fp8scope::trace::live {

namespace {

using clock = std::chrono::steady_clock;

std::chrono::milliseconds left(clock::time_point deadline) {
    auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    return d.count() < 0 ? std::chrono::milliseconds(0) : d;
}

}  // namespace

LiveClient::LiveClient(const std::string& address, const std::string& token, std::chrono::milliseconds timeout) {
    try {
        if (address.rfind("unix:", 0) == 0) {
            fd_ = connect_unix(address.substr(5));
        } else if (address.rfind("tcp:", 0) == 0) {
            std::string rest = address.substr(4);
            auto colon = rest.rfind(':');
            if (colon == std::string::npos) throw LiveError("address '" + address + "' has no port");
            std::string host = rest.substr(0, colon);
            if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
            fd_ = connect_tcp(host, std::stoi(rest.substr(colon + 1)));
            auto frame = encode_frame(MsgType::Auth, encode_auth(token));
            if (!send_all(fd_.get(), frame.data(), frame.size())) throw LiveError("the server closed the connection");
        } else {
            throw LiveError("address '" + address + "' is neither unix:PATH nor tcp:HOST:PORT");
        }
    } catch (const LiveError&) {
        throw;
    } catch (const std::exception& e) {
        throw LiveError(e.what());
    }
    auto deadline = clock::now() + timeout;
    while (!have_meta_) {
        if (!replies_.empty()) throw LiveError("refused: " + replies_.front().error);
        if (!pump(left(deadline)) && clock::now() >= deadline) throw LiveError("no meta from the server in time");
    }
}

void LiveClient::handle(const Frame& f) {
    switch (f.type) {
        case MsgType::Meta:
            meta_ = decode_meta(f.payload);
            have_meta_ = true;
            break;
        case MsgType::Record: {
            if (!have_meta_) throw LiveError("record before the meta");
            Record r = decode_record(f.payload);
            if (auto e = check_record(meta_, meta_.ops.size(), r); !e.empty()) throw LiveError("bad record: " + e);
            if (auto* n = std::get_if<OpNameRecord>(&r)) meta_.ops.push_back(n->name);
            records_.push_back(std::move(r));
            break;
        }
        case MsgType::Reply: replies_.push_back(decode_reply(f.payload)); break;
        default: throw LiveError("unexpected message type " + std::to_string(static_cast<int>(f.type)));
    }
}

bool LiveClient::pump(std::chrono::milliseconds timeout) {
    if (!fd_.valid()) throw LiveError("the connection is closed");
    pollfd p{fd_.get(), POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (rc == 0) return false;
    if (rc < 0) {
        if (errno == EINTR) return false;
        throw LiveError("poll failed");
    }
    char buf[65536];
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n <= 0) {
        fd_.reset();
        // A refusal arrives just before the server closes: report it rather than the close.
        try {
            while (auto f = in_.next()) handle(*f);
        } catch (const std::exception&) {
        }
        if (!replies_.empty() && !replies_.back().ok) throw LiveError("closed by the server: " + replies_.back().error);
        throw LiveError("the server closed the connection");
    }
    in_.feed(buf, static_cast<std::size_t>(n));
    try {
        while (auto f = in_.next()) handle(*f);
    } catch (const ProtocolError& e) {
        fd_.reset();
        throw LiveError(std::string("malformed data from the server: ") + e.what());
    }
    return true;
}

std::optional<Record> LiveClient::next(std::chrono::milliseconds timeout) {
    auto deadline = clock::now() + timeout;
    while (records_.empty()) {
        pump(left(deadline));
        if (clock::now() >= deadline && records_.empty()) return std::nullopt;
    }
    Record r = std::move(records_.front());
    records_.pop_front();
    return r;
}

std::optional<Reply> LiveClient::next_reply(std::chrono::milliseconds timeout) {
    auto deadline = clock::now() + timeout;
    while (replies_.empty()) {
        pump(left(deadline));
        if (clock::now() >= deadline && replies_.empty()) return std::nullopt;
    }
    Reply r = replies_.front();
    replies_.pop_front();
    return r;
}

Reply LiveClient::command(const Command& command, std::chrono::milliseconds timeout) {
    auto frame = encode_frame(MsgType::Command, encode_command(command));
    send_raw(frame.data(), frame.size());
    auto r = next_reply(timeout);
    if (!r) throw LiveError(std::string("no reply to ") + command_name(command.kind) + " in time");
    return *r;
}

void LiveClient::send_raw(const void* data, std::size_t n) {
    if (!fd_.valid() || !send_all(fd_.get(), data, n)) throw LiveError("the connection is closed");
}

}  // namespace fp8scope::trace::live
