// libFuzzer harness of the PyTorch capture manifest reader: any bytes as DIR/manifest.json
// either read (every tensor naming a listed linear, with a shape) or throw CaptureError
// naming the file.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "torch_capture.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace fs = std::filesystem;
    static const fs::path dir = [] {
        const fs::path d = fs::path(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") /
                           ("fp8scope-fuzz-" + std::to_string(::getpid()) + "-capture");
        fs::create_directories(d);
        return d;
    }();
    // Registered once `dir` is made, so it runs before `dir` is destroyed.
    static const bool cleanup = std::atexit([] { fs::remove_all(dir); }) == 0;
    (void)cleanup;
    std::ofstream(dir / "manifest.json", std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), std::streamsize(size));
    try {
        const auto c = fp8scope::import::read_torch_capture(dir.string());
        for (const auto& t : c.tensors)
            if (t.linear < 0 || std::size_t(t.linear) >= c.linears.size() || t.rows < 1 || t.cols < 1) std::abort();
    } catch (const fp8scope::import::CaptureError& e) {
        if (std::string(e.what()).find("manifest.json") == std::string::npos) std::abort();
    }
    return 0;
}
