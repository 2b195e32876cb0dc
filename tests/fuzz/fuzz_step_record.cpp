// libFuzzer harness of a peer's step record (DataParallel's share of a step): any bytes
// either decode or throw RendezvousError, and what decodes encodes to the same bytes.
// The first input byte picks the sender's rank; the step expected is the one the record
// names, so the fuzzer reaches the checks past it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "comm/rendezvous.h"
#include "engine/data_parallel.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const int from = data[0] % 3;
    const std::string blob(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::int64_t step = 0;
    if (blob.size() >= sizeof step) std::memcpy(&step, blob.data(), sizeof step);
    try {
        const fp8scope::DataParallel::StepShare s = fp8scope::DataParallel::decode_share(blob, from, step);
        if (s.record.rank != from || s.record.step != step) std::abort();
        if (fp8scope::DataParallel::encode_share(s) != blob) std::abort();
    } catch (const fp8scope::RendezvousError&) {
    }
    return 0;
}
