// libFuzzer harness of the config reader and the --set parser: any text either gives a
// config or throws std::invalid_argument; a config that loads writes back to JSON that
// loads again (the writer and the reader share one field list).
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "engine/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const fp8scope::TrainConfig c = fp8scope::train_config_from_json(text, "fuzz.json");
        fp8scope::train_config_from_json(fp8scope::train_config_to_json(c), "written.json");
    } catch (const std::invalid_argument&) {
    }
    try {
        fp8scope::TrainConfig c;
        fp8scope::apply_override(c, text);
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
