// libFuzzer harness of the control requests rank 0 sends its peers: any text either
// decodes or throws std::runtime_error, and what decodes encodes to text that decodes to
// the same requests. The first input byte picks the job's number of runs.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "engine/control_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const int runs = 1 + data[0] % 5;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::string once;
    try {
        once = fp8scope::encode_requests(fp8scope::decode_requests(text, runs));
    } catch (const std::runtime_error&) {
        return 0;
    }
    if (fp8scope::encode_requests(fp8scope::decode_requests(once, runs)) != once) std::abort();
    return 0;
}
