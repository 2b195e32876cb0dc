// Opening only regular files, whole-file reads and positioned reads with 64-bit offsets.
#include "io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/tensor_file.h"

namespace fp8scope {

namespace {

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "is a directory, not a regular file";
    if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device, not a regular file";
    if (S_ISSOCK(mode)) return "is a socket, not a regular file";
    return "is not a regular file";
}

}  // namespace

OpenedFile open_regular_file(const std::string& path) {
    OpenedFile f;
    // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting.
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        f.problem = std::strerror(errno);
        return f;
    }
    struct stat st{};
    const bool stat_ok = ::fstat(fd, &st) == 0;
    if (!stat_ok || !S_ISREG(st.st_mode)) {
        f.problem = stat_ok ? kind_of(st.st_mode) : std::strerror(errno);
        ::close(fd);
        return f;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    f.fd = fd;
    f.size = static_cast<std::uint64_t>(st.st_size);
    return f;
}

std::string read_regular_file(const std::string& path, std::string_view what, std::uint64_t max_bytes) {
    auto fail = [&](const std::string& problem) {
        return std::invalid_argument(path + ": cannot read " + std::string(what) + ": " + problem);
    };
    OpenedFile f = open_regular_file(path);
    if (f.fd < 0) throw std::invalid_argument(path + ": cannot open " + std::string(what) + ": " + f.problem);
    if (f.size > max_bytes) {
        ::close(f.fd);
        throw fail(std::to_string(f.size) + " bytes, more than the " + std::to_string(max_bytes) + " allowed");
    }
    std::string out(static_cast<std::size_t>(f.size), '\0');
    std::size_t done = 0;
    while (done < out.size()) {
        ssize_t n = ::read(f.fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const std::string why = n < 0 ? std::strerror(errno) : "the file shrank while reading";
            ::close(f.fd);
            throw fail(why);
        }
        done += static_cast<std::size_t>(n);
    }
    ::close(f.fd);
    return out;
}

InputFile::InputFile(const std::string& path) : path_(path) {
    OpenedFile f = open_regular_file(path);
    if (f.fd < 0) throw TensorFileError(path, "cannot open: " + f.problem);
    size_ = f.size;
    errno = 0;
    file_ = ::fdopen(f.fd, "rb");
    if (!file_) {
        ::close(f.fd);
        throw TensorFileError(path, std::string("cannot open: ") + std::strerror(errno));
    }
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
    if (fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0)
        throw TensorFileError(path_, std::string("cannot seek: ") + std::strerror(errno));
    if (std::fread(dst, 1, n, file_) != n) {
        std::string why = std::ferror(file_) ? std::strerror(errno) : "file shrank while reading";
        throw TensorFileError(path_, "read failed at offset " + std::to_string(offset) + ": " + why);
    }
}

}  // namespace fp8scope
