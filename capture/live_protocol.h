// The live stream's wire format, shared by the engine's server and the GUI's client.
// A frame is a little-endian u32 length, then a one-byte message type, then the payload
// (length counts the type byte and the payload, at most kMaxFrame). Payloads are
// MessagePack maps (NaN and Inf survive, unlike JSON) of the same record structs the
// trace file holds. Decoding validates everything and throws ProtocolError.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace_records.h"

namespace fp8scope::trace::live {

constexpr std::uint32_t kMaxFrame = 16u << 20;

class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class MsgType : std::uint8_t {
    Meta = 1,      // server -> client: the TraceMeta, first after the handshake
    Record = 2,    // server -> client: one record
    Reply = 3,     // server -> client: the answer to a command or an error
    Auth = 16,     // client -> server: {"token": ...}; first frame over TCP
    Command = 17,  // client -> server: a control command
};

struct Frame {
    MsgType type = MsgType::Reply;
    std::vector<std::uint8_t> payload;
};

std::vector<std::uint8_t> encode_frame(MsgType type, const std::vector<std::uint8_t>& payload);

// Splits a byte stream into frames. A length of 0 or past kMaxFrame throws ProtocolError:
// the stream cannot be trusted after that. Types are the receiver's to check (an unknown
// type is answered and skipped).
class FrameReader {
public:
    void feed(const void* data, std::size_t n);
    std::optional<Frame> next();
    std::size_t buffered() const { return buf_.size() - pos_; }

private:
    std::vector<std::uint8_t> buf_;
    std::size_t pos_ = 0;
};

struct Command {
    enum class Kind { Pause, Resume, Stop, SwitchRecipe, SetCaptureEvery, CheckpointNow };
    Kind kind = Kind::Pause;
    std::int32_t run = 0;     // SwitchRecipe
    std::string recipe;       // SwitchRecipe: a training recipe name
    std::int64_t every = 0;   // SetCaptureEvery
    std::string path;         // CheckpointNow ("" : the run's checkpoint dir)

    static Command of(Kind k) {
        Command c;
        c.kind = k;
        return c;
    }
    static Command switch_recipe(std::int32_t run, std::string recipe) {
        Command c = of(Kind::SwitchRecipe);
        c.run = run;
        c.recipe = std::move(recipe);
        return c;
    }
    static Command capture_every(std::int64_t every) {
        Command c = of(Kind::SetCaptureEvery);
        c.every = every;
        return c;
    }
    static Command checkpoint(std::string path) {
        Command c = of(Kind::CheckpointNow);
        c.path = std::move(path);
        return c;
    }
};
const char* command_name(Command::Kind k);  // "pause", "switch_recipe", ...

struct Reply {
    bool ok = true;
    std::string error;
};

std::vector<std::uint8_t> encode_meta(const TraceMeta& meta);
TraceMeta decode_meta(const std::vector<std::uint8_t>& payload);
std::vector<std::uint8_t> encode_record(const Record& record);
Record decode_record(const std::vector<std::uint8_t>& payload);
std::vector<std::uint8_t> encode_command(const Command& command);
Command decode_command(const std::vector<std::uint8_t>& payload);
std::vector<std::uint8_t> encode_reply(const Reply& reply);
Reply decode_reply(const std::vector<std::uint8_t>& payload);
std::vector<std::uint8_t> encode_auth(const std::string& token);
std::string decode_auth(const std::vector<std::uint8_t>& payload);

}  // namespace fp8scope::trace::live
