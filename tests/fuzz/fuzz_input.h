// What every fuzzing harness shares: the readers take a path, so each input is written
// to a file of this process first (in memory under /dev/shm where there is one, else
// /tmp; removed at exit).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fp8scope::fuzz {

// Writes `data` to this process's scratch file with extension `ext` and returns its path.
inline std::string input_file(const std::uint8_t* data, std::size_t size, const char* ext) {
    static const std::string base = std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                                    "/fp8scope-fuzz-" + std::to_string(::getpid());
    const std::string path = base + ext;
    static bool registered = false;
    if (!registered) {
        registered = true;
        std::atexit([] {
            for (const char* e : {".npy", ".safetensors", ".h5", ".json", ".ckpt"}) std::remove((base + e).c_str());
        });
    }
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
    return path;
}

}  // namespace fp8scope::fuzz
