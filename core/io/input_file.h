// Files from other people's machines, opened for reading only when they are regular
// files: a FIFO or a device (a path like /dev/zero given as data or a config) would block
// the open or never end. InputFile gives positioned reads for the tensor file readers
// (errors are TensorFileErrors naming the path; sizes are 64-bit on every platform);
// read_regular_file reads a whole config, data file or checkpoint.
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fp8scope {

// Opens `path` read-only without blocking, then refuses anything but a regular file
// (checked on the opened descriptor, so the file cannot be swapped in between). Returns
// the descriptor and its size, or fd -1 and the `problem` ("No such file or directory",
// "is a FIFO, not a regular file", ...); never throws.
struct OpenedFile {
    int fd = -1;
    std::uint64_t size = 0;
    std::string problem;
};
OpenedFile open_regular_file(const std::string& path);

// The whole content of a regular file of at most `max_bytes`. Throws
// std::invalid_argument "PATH: cannot open WHAT: PROBLEM" (or "cannot read").
std::string read_regular_file(const std::string& path, std::string_view what,
                              std::uint64_t max_bytes = UINT64_MAX);

class InputFile {
public:
    explicit InputFile(const std::string& path);  // must be a readable regular file
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    std::uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }
    // Reads exactly n bytes at offset; the caller has checked offset + n <= size().
    void read(std::uint64_t offset, void* dst, std::uint64_t n);

private:
    std::string path_;
    std::FILE* file_ = nullptr;
    std::uint64_t size_ = 0;
};

}  // namespace fp8scope
