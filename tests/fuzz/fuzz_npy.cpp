// libFuzzer harness of the .npy reader: any bytes either load or throw TensorFileError;
// anything else (another exception, a crash, a sanitizer report) is a finding.
#include "fuzz_input.h"
#include "io/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        fp8scope::read_npy(fp8scope::fuzz::input_file(data, size, ".npy"));
    } catch (const fp8scope::TensorFileError&) {
    }
    return 0;
}
