// The live stream between an engine and its GUIs: where to connect, and the commands a
// client may send. Records on the wire are the trace records of trace_records.h, so a
// live run and a saved trace fill the GUI's store the same way.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fp8scope::live {

class LiveError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Endpoint {
    enum class Kind { Local, Tcp };
    Kind kind = Kind::Local;
    std::string path;  // Local: the Unix-domain socket
    std::string host;  // Tcp: address to bind or connect to
    int port = 0;      // Tcp: 0 when binding means "any free port"

    std::string to_string() const;  // "unix:/run/user/1000/fp8scope/engine-42.sock", "tcp:127.0.0.1:7878"
};

// "unix:PATH", a path with a '/', "tcp:PORT", "tcp:HOST:PORT" or "HOST:PORT".
// Throws LiveError naming the text.
Endpoint parse_endpoint(std::string_view text);
// A fresh socket path only this user can reach: $XDG_RUNTIME_DIR/fp8scope/ (or
// /tmp/fp8scope-UID/), directory mode 0700, named after the process id.
std::string default_socket_path();

enum class CommandKind : std::int32_t {
    Pause = 0,
    Resume = 1,
    Stop = 2,
    SwitchRecipe = 3,     // run (-1: every run), recipe
    SetCaptureEvery = 4,  // value: capture operand statistics every N steps (0: off)
    Checkpoint = 5,       // write a checkpoint now
    RecordKernels = 6,    // value: keep every kernel's record of the next N steps
};

struct Command {
    CommandKind kind = CommandKind::Pause;
    std::int32_t run = -1;
    std::string recipe;
    std::int64_t value = 0;
    std::string reason = {};  // not on the wire: why the server issued it itself (an event's detail)
};

struct CommandReply {
    bool ok = false;
    std::string error;  // why it was refused; empty when ok
};

}  // namespace fp8scope::live
