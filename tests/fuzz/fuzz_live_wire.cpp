// libFuzzer harness of the live wire: the frame splitter over any buffer, and every body
// decoder. A body either decodes or throws WireError; what decodes encodes again and
// decodes to a frame of the same bytes (one field list per record drives both ways).
#include <cstdlib>
#include <string_view>

#include "live_wire.h"

namespace w = fp8scope::live::wire;

namespace {

template <class Decode>
void round_trip(std::string_view body, Decode decode) {
    try {
        const auto m = decode(body);
        const std::string again = w::frame(m);
        const auto back = decode(std::string_view(again).substr(w::kHeader));
        if (w::frame(back) != again) std::abort();
    } catch (const w::WireError&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view buffer(reinterpret_cast<const char*>(data), size);
    // Frames as a server reads them from a socket.
    for (std::size_t pos = 0; pos < buffer.size();) {
        w::FrameView f{};
        std::size_t used = 0;
        const w::Split s = w::split_frame(buffer.substr(pos), f, used);
        if (s == w::Split::NeedMore || s == w::Split::TooLarge) break;
        pos += s == w::Split::Empty ? 4 : used;
    }
    if (size == 0) return 0;
    const std::string_view body = buffer.substr(1);
    switch (data[0] % 13) {
        case 0: round_trip(body, w::decode_hello); break;
        case 1: round_trip(body, w::decode_meta); break;
        case 2: round_trip(body, [](std::string_view b) { return w::decode_step(b); }); break;
        case 3: round_trip(body, w::decode_event); break;
        case 4: round_trip(body, w::decode_scaling); break;
        case 5: round_trip(body, w::decode_operand); break;
        case 6: round_trip(body, w::decode_blockmap); break;
        case 7: round_trip(body, w::decode_op); break;
        case 8: round_trip(body, w::decode_op_name); break;
        case 9: round_trip(body, w::decode_command); break;
        case 10: round_trip(body, w::decode_reply); break;
        case 12: round_trip(body, [](std::string_view b) { return w::decode_rank_step(b); }); break;
        default: round_trip(body, w::decode_error); break;
    }
    return 0;
}
