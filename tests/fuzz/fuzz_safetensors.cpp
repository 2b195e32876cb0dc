// libFuzzer harness of the .safetensors reader: any bytes either load (at least one
// tensor) or throw TensorFileError.
#include <cstdlib>

#include "fuzz_input.h"
#include "io/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        if (fp8scope::read_safetensors(fp8scope::fuzz::input_file(data, size, ".safetensors")).empty())
            std::abort();  // "no tensors" is an error, never an empty success
    } catch (const fp8scope::TensorFileError&) {
    }
    return 0;
}
