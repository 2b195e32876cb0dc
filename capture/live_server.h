// The engine side of the live stream: a socket server that sends every connected client
// the TraceMeta, then each record as it is produced, and hands control commands to the
// trainer. Default endpoint: a Unix-domain socket in a 0700 directory, mode 0600, so only
// the user can connect. TCP only when asked, bound to 127.0.0.1 unless an address is
// given, and always behind a token. The training thread only queues records; one I/O
// thread does the rest, and a client that falls behind is dropped, never waited for.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "live_protocol.h"

namespace fp8scope::trace::live {

// Where to listen: "unix" (default path), "unix:PATH", "tcp:PORT" (127.0.0.1),
// "ADDR:PORT" (that address). Port 0 picks a free port.
struct Endpoint {
    bool tcp = false;
    std::string path;  // unix
    std::string host;  // tcp
    int port = 0;
};
// Throws std::invalid_argument naming the spec.
Endpoint parse_endpoint(const std::string& spec);
// $XDG_RUNTIME_DIR/fp8scope/engine-PID.sock, or /tmp/fp8scope-UID/engine-PID.sock.
std::string default_socket_path();

struct ServerOptions {
    std::string listen = "unix";
    std::string token;                         // TCP: "" makes a random one
    std::size_t client_queue_bytes = 64u << 20;  // past this a client is dropped
    std::size_t record_queue = 65536;          // records waiting for the I/O thread
};

// Applies a command; throws std::exception with the reason to refuse it.
using CommandHandler = std::function<void(const Command&)>;

class LiveServer : public RecordSink {
public:
    // Binds and starts the I/O thread. Throws std::runtime_error naming the endpoint.
    LiveServer(const TraceMeta& meta, ServerOptions options, CommandHandler handler);
    ~LiveServer() override;
    LiveServer(const LiveServer&) = delete;
    LiveServer& operator=(const LiveServer&) = delete;

    // Never blocks: with no client it returns at once; when the I/O thread is behind the
    // record is dropped and the clients that would miss it are disconnected.
    void write(Record record) override;

    std::string address() const;       // "unix:PATH" or "tcp:HOST:PORT", for clients
    const std::string& token() const;  // "" for Unix sockets
    int clients() const;               // connected and authenticated
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fp8scope::trace::live
