// The live stream's wire format: length-prefixed binary frames, one per message.
//
// Frame: u32 payload length (little-endian, counts the type byte and the body, at most
// kMaxFrame), u8 message type, body. Bodies are the fields of a record in the order of its
// field list (record_fields.h, fp8/stats_fields.h; declaration order): integers and IEEE
// floats little-endian in their own width (so NaN "not computed" survives), bool as u8,
// enums in the width of their type (gemm u8, event kind i32), strings and vectors as a u32
// count followed by their elements. Every count is checked against the bytes left in the frame before
// anything is allocated, and a body must be consumed exactly, so a malformed frame is
// refused as a whole. Binary rather than JSON because an operand record carries a
// 277-bin histogram and per-channel vectors at every capture step.
//
// Session: the client sends Hello (magic, version, token); the engine answers Meta
// (magic, version, TraceMeta) or Error and closes. Then records flow to the client, and
// Command frames (with an id) flow to the engine, each answered by a Reply with that id.
// An op name that appears after the start (a CUPTI kernel) comes as OpName before the
// first record that uses its id; a later client finds it in Meta's op table instead.
//
// A message type a side does not know is an error: the engine answers Error UnknownType,
// a client closes the connection. A new message type or a changed body raises kVersion
// (2: OpName; 3: kernel fields of Op; 4: RankStep, and rank and world_size in Meta; 5:
// grad_dtype in Meta; 6: a Step's step time in milliseconds, step_ms, where it was in
// seconds, and baseline_run in Meta; 7: the runs' precision plans in Meta; 8: the outlier
// injections in Meta, and the injection event kind; 9: RankStep's FP8 gradient sum
// figures, which a RankStep of an older version goes on without, kernel_timings and
// kernel_window in Meta, the RecordKernels command and KernelStep, which clients of older
// versions are not sent; 10: the world_changed event kind, which older clients get as a
// health event). Versions kOldestVersion..kVersion differ only in Meta, whose body carries its
// version and the fields of that version (WireSince in record_fields.h), and in the unit
// of Step's step time (frame and decode_step take the session's version): the engine
// answers a Hello of any of them in the Hello's version, and a client refused by an engine
// of an older version greets it again in kOldestVersion.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "live_protocol.h"
#include "trace_records.h"

namespace fp8scope::live::wire {

constexpr std::uint32_t kVersion = 10;
constexpr std::uint32_t kWorldChangedVersion = 10;  // older clients get world_changed as health
constexpr std::uint32_t kRankSumVersion = 9;    // RankSteps before it lack the FP8 sum figures
constexpr std::uint32_t kStepMsVersion = 6;     // Steps before it carry the step time in seconds
constexpr std::uint32_t kOldestVersion = 4;       // the oldest an engine and a client still speak
constexpr std::string_view kMagic = "fp8scope";   // 8 bytes at the start of Hello and Meta
constexpr std::uint32_t kMaxFrame = 16u << 20;    // 16 MiB
constexpr std::size_t kHeader = 5;                // length + type

enum class Msg : std::uint8_t {
    Hello = 1,
    Meta = 2,
    Step = 3,
    Event = 4,
    Scaling = 5,
    Operand = 6,
    BlockMap = 7,
    Op = 8,
    Command = 9,
    Reply = 10,
    Error = 11,
    OpName = 12,
    RankStep = 13,  // one rank's share of a data-parallel step
    KernelStep = 14,  // a step's kernel sum (since version 9; never sent to older clients)
};
constexpr std::uint32_t kKernelStepVersion = 9;

// Why the engine refused something; the client turns these into LiveError messages.
enum class ErrorCode : std::uint32_t {
    WrongToken = 1,
    BadVersion = 2,
    FrameTooLarge = 3,
    UnknownType = 4,
    Malformed = 5,
    NotHello = 6,
    TooManyClients = 7,
};

// A body that does not decode: truncated, trailing bytes, a count past the frame, an
// enum out of range.
class WireError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Hello {
    std::uint32_t version = kVersion;
    std::string token;
};

// Encoded with the fields of `version` (a version from before a field leaves it out);
// decoded likewise, so a Meta of an older version reads with the newer fields' defaults.
struct MetaMsg {
    std::uint32_t version = kVersion;
    trace::TraceMeta meta;
};

struct CommandMsg {
    std::uint32_t id = 0;
    Command command;
};

struct ReplyMsg {
    std::uint32_t id = 0;
    CommandReply reply;
};

struct ErrorMsg {
    ErrorCode code = ErrorCode::Malformed;
    std::string message;
};

// A whole frame (header and body) for each message.
std::string frame(const Hello& m);
std::string frame(const MetaMsg& m);
std::string frame(const trace::StepRecord& r, std::uint32_t version = kVersion);
std::string frame(const trace::EventRecord& r);
std::string frame(const trace::ScalingRecord& r);
std::string frame(const trace::OperandRecord& r);
std::string frame(const trace::BlockMapRecord& r);
std::string frame(const trace::OpRecord& r);
std::string frame(const trace::OpNameRecord& r);
std::string frame(const trace::RankStepRecord& r, std::uint32_t version = kVersion);
std::string frame(const trace::KernelStepRecord& r);
std::string frame(const CommandMsg& m);
std::string frame(const ReplyMsg& m);
std::string frame(const ErrorMsg& m);

// Decoders take the body (the bytes after the type byte) and throw WireError.
// Hello and Meta also throw when the magic is missing.
Hello decode_hello(std::string_view body);
MetaMsg decode_meta(std::string_view body);
trace::StepRecord decode_step(std::string_view body, std::uint32_t version = kVersion);
trace::EventRecord decode_event(std::string_view body);
trace::ScalingRecord decode_scaling(std::string_view body);
trace::OperandRecord decode_operand(std::string_view body);
trace::BlockMapRecord decode_blockmap(std::string_view body);
trace::OpRecord decode_op(std::string_view body);
// Also refuses a negative id and an empty name.
trace::OpNameRecord decode_op_name(std::string_view body);
trace::RankStepRecord decode_rank_step(std::string_view body, std::uint32_t version = kVersion);
trace::KernelStepRecord decode_kernel_step(std::string_view body);
CommandMsg decode_command(std::string_view body);
ReplyMsg decode_reply(std::string_view body);
ErrorMsg decode_error(std::string_view body);

// Splits complete frames off the front of a receive buffer.
struct FrameView {
    Msg type;               // may be a value outside Msg: the caller checks
    std::string_view body;
};
enum class Split { Frame, NeedMore, TooLarge, Empty };
// Frame: `out` views into `buffer` and `consumed` is its size. TooLarge: the announced
// length is over kMaxFrame. Empty: a zero length (no type byte), also refused.
Split split_frame(std::string_view buffer, FrameView& out, std::size_t& consumed);

}  // namespace fp8scope::live::wire
