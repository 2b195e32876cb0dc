// Positioned reads through stdio with 64-bit offsets.
#include "io/input_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "io/tensor_file.h"

namespace fp8scope {

namespace {

int seek(std::FILE* f, std::uint64_t offset) {
#ifdef _WIN32
    return _fseeki64(f, static_cast<long long>(offset), SEEK_SET);
#else
    return fseeko(f, static_cast<off_t>(offset), SEEK_SET);
#endif
}

}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
    std::error_code ec;
    auto status = std::filesystem::status(path, ec);
    if (ec) throw TensorFileError(path, "cannot open: " + ec.message());
    if (status.type() != std::filesystem::file_type::regular)
        throw TensorFileError(path, "cannot open: not a regular file");
    size_ = std::filesystem::file_size(path, ec);
    if (ec) throw TensorFileError(path, "cannot read size: " + ec.message());
    errno = 0;
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) throw TensorFileError(path, std::string("cannot open: ") + std::strerror(errno));
}

InputFile::~InputFile() {
    if (file_) std::fclose(file_);
}

void InputFile::read(std::uint64_t offset, void* dst, std::uint64_t n) {
    if (n == 0) return;
    if (offset > size_ || n > size_ - offset)
        throw TensorFileError(path_, "read of " + std::to_string(n) + " bytes at offset " +
                                         std::to_string(offset) + " past the end of the file");
    errno = 0;
    if (seek(file_, offset) != 0)
        throw TensorFileError(path_, std::string("cannot seek: ") + std::strerror(errno));
    if (std::fread(dst, 1, n, file_) != n) {
        std::string why = std::ferror(file_) ? std::strerror(errno) : "file shrank while reading";
        throw TensorFileError(path_, "read failed at offset " + std::to_string(offset) + ": " + why);
    }
}

}  // namespace fp8scope
