// libFuzzer harness of the checkpoint reader and the delayed-scaling state inside it.
// The first byte picks what the rest is: a whole file (0), a payload that gets a valid
// header and checksum so the fuzzer reaches the field parser (1), or a recipe state (2).
// Errors must be std::runtime_error (the file) or std::invalid_argument (its config).
#include <cstring>
#include <stdexcept>
#include <vector>

#include "cpu/cpu_backend.h"
#include "engine/checkpoint.h"
#include "engine/fp8_linear.h"
#include "engine/train_config.h"

namespace {

std::vector<std::uint8_t> with_header(const std::uint8_t* p, std::size_t n) {
    fp8scope::TrainState empty;
    std::vector<std::uint8_t> file = fp8scope::serialize_checkpoint(empty);
    file.resize(24);  // magic, version, payload size, checksum
    const std::uint64_t size = n;
    const std::uint32_t crc = fp8scope::crc32({p, n});
    std::memcpy(file.data() + 12, &size, 8);
    std::memcpy(file.data() + 20, &crc, 4);
    file.insert(file.end(), p, p + n);
    return file;
}

void load_state(const std::vector<std::uint8_t>& bytes) {
    static fp8scope::CpuBackend cpu(1);
    fp8scope::Fp8Linear linear(cpu, {fp8scope::LinearInfo{"l0", 0, 16, 16}});
    try {
        linear.load_state(bytes);
    } catch (const std::runtime_error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::uint8_t mode = data[0] % 3;
    const std::vector<std::uint8_t> rest(data + 1, data + size);
    if (mode == 2) {
        load_state(rest);
        return 0;
    }
    try {
        const auto bytes = mode == 1 ? with_header(rest.data(), rest.size()) : rest;
        const fp8scope::TrainState s = fp8scope::deserialize_checkpoint(bytes, "fuzz.ckpt");
        for (const auto& run : s.runs) load_state(run.recipe_state);
        fp8scope::train_config_from_json(s.config_json, "fuzz.ckpt (config)");
    } catch (const std::runtime_error&) {
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
