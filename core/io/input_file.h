// A file opened for positioned reads, for the tensor file readers. Errors are
// TensorFileErrors naming the path; sizes are 64-bit on every platform.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace fp8scope {

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
