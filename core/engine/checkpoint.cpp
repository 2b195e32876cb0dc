// Checkpoint serialization, checksum and atomic file replacement.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "io/input_file.h"

namespace fp8scope {
namespace {

constexpr char kMagic[8] = {'F', 'P', '8', 'S', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kVersion = 2;
constexpr std::uint32_t kOldestVersion = 1;  // without the world size
constexpr std::size_t kHeaderBytes = 8 + 4 + 8 + 4;

std::array<std::uint32_t, 256> crc_table() {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}

class Writer {
public:
    template <class T>
    void pod(const T& v) {
        bytes(&v, sizeof(T));
    }
    template <class T>
    void array(const std::vector<T>& v) {
        pod(static_cast<std::uint64_t>(v.size()));
        bytes(v.data(), v.size() * sizeof(T));
    }
    void string(const std::string& s) {
        pod(static_cast<std::uint64_t>(s.size()));
        bytes(s.data(), s.size());
    }
    void bytes(const void* p, std::size_t n) {
        std::size_t at = out.size();
        out.resize(at + n);
        if (n) std::memcpy(out.data() + at, p, n);
    }
    std::vector<std::uint8_t> out;
};

class Reader {
public:
    Reader(std::span<const std::uint8_t> bytes, const std::string& origin) : bytes_(bytes), origin_(origin) {}
    template <class T>
    T pod(const char* field) {
        need(sizeof(T), field);
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    template <class T>
    std::vector<T> array(const char* field) {
        auto n = pod<std::uint64_t>(field);
        if (n > (bytes_.size() - pos_) / sizeof(T)) fail(std::string("truncated field '") + field + "'");
        std::vector<T> v(static_cast<std::size_t>(n));
        if (n) std::memcpy(v.data(), bytes_.data() + pos_, v.size() * sizeof(T));  // data() may be null
        pos_ += v.size() * sizeof(T);
        return v;
    }
    std::string string(const char* field) {
        auto v = array<char>(field);
        return std::string(v.begin(), v.end());
    }
    bool at_end() const { return pos_ == bytes_.size(); }
    [[noreturn]] void fail(const std::string& why) const { throw std::runtime_error(origin_ + ": " + why); }

private:
    void need(std::size_t n, const char* field) {
        if (bytes_.size() - pos_ < n) fail(std::string("truncated field '") + field + "'");
    }
    std::span<const std::uint8_t> bytes_;
    std::size_t pos_ = 0;
    const std::string& origin_;
};

[[noreturn]] void io_error(const std::string& path, const char* what) {
    throw std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

// A checkpoint is written as NAME.ckpt.tmp.PID and renamed; a writer killed with -9 leaves
// the temporary behind. Those of processes that no longer exist are removed before the
// next checkpoint in the directory; a live writer's (another run sharing it) is kept.
constexpr std::string_view kTempInfix = ".ckpt.tmp.";

bool process_exists(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

void remove_stale_temporaries(const std::filesystem::path& dir) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const std::size_t at = name.rfind(kTempInfix);
        if (at == std::string::npos) continue;
        const std::string digits = name.substr(at + kTempInfix.size());
        if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
        std::error_code file_ec;
        if (!process_exists(std::stol(digits)) && it->is_regular_file(file_ec))
            std::filesystem::remove(it->path(), file_ec);
    }
}

}  // namespace

std::uint32_t crc32(std::span<const std::uint8_t> bytes) {
    static const auto table = crc_table();
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::uint8_t b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

std::vector<std::uint8_t> serialize_checkpoint(const TrainState& s) {
    Writer p;
    p.string(s.config_json);
    p.pod(s.step);
    p.pod(s.next_batch);
    p.array(s.skipped_batches);
    p.pod(s.rewinds);
    p.pod(static_cast<std::uint64_t>(s.runs.size()));
    for (const auto& r : s.runs) {
        p.string(r.recipe);
        p.array(r.params);
        p.array(r.m);
        p.array(r.v);
        p.pod(r.adam_steps);
        p.array(r.recipe_state);
        p.array(r.recent_losses);
    }
    p.pod(s.world_size);
    Writer file;
    file.bytes(kMagic, sizeof(kMagic));
    file.pod(kVersion);
    file.pod(static_cast<std::uint64_t>(p.out.size()));
    file.pod(crc32(p.out));
    file.bytes(p.out.data(), p.out.size());
    return std::move(file.out);
}

TrainState deserialize_checkpoint(std::span<const std::uint8_t> bytes, const std::string& origin) {
    Reader header(bytes, origin);
    if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0)
        header.fail("not an fp8scope checkpoint (bad magic)");
    header.pod<std::uint64_t>("magic");
    auto version = header.pod<std::uint32_t>("version");
    if (version < kOldestVersion || version > kVersion)
        header.fail("checkpoint version " + std::to_string(version) + " is not supported (expected " +
                    std::to_string(kOldestVersion) + " to " + std::to_string(kVersion) + ")");
    auto size = header.pod<std::uint64_t>("payload size");
    auto crc = header.pod<std::uint32_t>("checksum");
    std::span<const std::uint8_t> payload = bytes.subspan(kHeaderBytes);
    if (payload.size() != size)
        header.fail("checkpoint payload is " + std::to_string(payload.size()) + " bytes, header says " +
                    std::to_string(size) + " (truncated or padded file)");
    if (crc32(payload) != crc) header.fail("checkpoint checksum mismatch: the file is corrupt");

    Reader r(payload, origin);
    TrainState s;
    s.config_json = r.string("config");
    s.step = r.pod<std::int64_t>("step");
    s.next_batch = r.pod<std::uint64_t>("next_batch");
    s.skipped_batches = r.array<std::uint64_t>("skipped_batches");
    s.rewinds = r.pod<std::int64_t>("rewinds");
    auto n = r.pod<std::uint64_t>("runs");
    if (n > 1024) r.fail("implausible run count " + std::to_string(n));
    for (std::uint64_t i = 0; i < n; ++i) {
        RunState rep;
        rep.recipe = r.string("recipe");
        rep.params = r.array<float>("params");
        rep.m = r.array<float>("adam m");
        rep.v = r.array<float>("adam v");
        rep.adam_steps = r.pod<std::int64_t>("adam steps");
        rep.recipe_state = r.array<std::uint8_t>("recipe state");
        rep.recent_losses = r.array<float>("recent losses");
        if (rep.m.size() != rep.params.size() || rep.v.size() != rep.params.size())
            r.fail("run " + std::to_string(i) + " has " + std::to_string(rep.params.size()) +
                   " params but " + std::to_string(rep.m.size()) + "/" + std::to_string(rep.v.size()) + " moments");
        s.runs.push_back(std::move(rep));
    }
    if (version >= 2) {
        s.world_size = r.pod<std::int32_t>("world size");
        if (s.world_size < 0) r.fail("world size " + std::to_string(s.world_size) + " is negative");
    }
    if (!r.at_end()) r.fail("unexpected bytes after the last run");
    return s;
}

void save_checkpoint(const std::string& path, const TrainState& state) {
    std::vector<std::uint8_t> bytes = serialize_checkpoint(state);
    std::filesystem::path target(path);
    if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
    remove_stale_temporaries(target.has_parent_path() ? target.parent_path() : ".");
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) io_error(tmp, "cannot create checkpoint");
    std::size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            ::close(fd);
            ::unlink(tmp.c_str());
            io_error(tmp, "cannot write checkpoint");
        }
        done += static_cast<std::size_t>(n);
    }
    const bool synced = ::fsync(fd) == 0;  // closed either way: a failed flush must not keep the file open
    if (::close(fd) != 0 || !synced) {
        ::unlink(tmp.c_str());
        io_error(tmp, "cannot flush checkpoint");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        ::unlink(tmp.c_str());
        io_error(path, "cannot rename checkpoint into place");
    }
}

TrainState load_checkpoint(const std::string& path) {
    // A regular file only: a FIFO or a device would hang or never end (read_regular_file).
    // Its invalid_argument becomes this API's runtime_error (checkpoint.h).
    std::string bytes;
    try {
        bytes = read_regular_file(path, "checkpoint");
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(e.what());
    }
    return deserialize_checkpoint({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}, path);
}

}  // namespace fp8scope
