// Checkpoint serialization, checksum and atomic file replacement.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <zlib.h>

#include "io/input_file.h"
#include "util/own_threads.h"

namespace fp8scope {
namespace {

constexpr char kMagic[8] = {'F', 'P', '8', 'S', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kVersion = 2;
constexpr std::uint32_t kOldestVersion = 1;  // without the world size
constexpr std::size_t kHeaderBytes = 8 + 4 + 8 + 4;

// A file's bytes as pieces: the small fields copied into one buffer, the large arrays
// borrowed where they lie (a host snapshot of many GB is written without a second copy).
class Writer {
public:
    template <class T>
    void pod(const T& v) {
        own(&v, sizeof(T));
    }
    template <class T>
    void array(std::span<const T> v) {
        pod(static_cast<std::uint64_t>(v.size()));
        if (!v.empty()) pieces_.push_back({reinterpret_cast<const std::uint8_t*>(v.data()), v.size_bytes()});
    }
    template <class T>
    void array(const std::vector<T>& v) {
        array(std::span<const T>(v));
    }
    void string(const std::string& s) {
        pod(static_cast<std::uint64_t>(s.size()));
        own(s.data(), s.size());
    }
    void append(Writer&& other) {  // other's pieces after these
        const std::size_t base = owned_.size();
        owned_.insert(owned_.end(), other.owned_.begin(), other.owned_.end());
        for (Piece p : other.pieces_) {
            if (!p.borrowed) p.offset += base;
            pieces_.push_back(p);
        }
    }
    void own(const void* p, std::size_t n) {
        if (pieces_.empty() || pieces_.back().borrowed) pieces_.push_back({nullptr, 0, owned_.size()});
        owned_.insert(owned_.end(), static_cast<const std::uint8_t*>(p), static_cast<const std::uint8_t*>(p) + n);
        pieces_.back().bytes += n;
    }
    // The pieces in order (valid while this lives and nothing is added).
    std::vector<std::span<const std::uint8_t>> spans() const {
        std::vector<std::span<const std::uint8_t>> out;
        for (const Piece& p : pieces_)
            out.emplace_back(p.borrowed ? p.borrowed : owned_.data() + p.offset, p.bytes);
        return out;
    }

private:
    struct Piece {
        const std::uint8_t* borrowed;  // null: owned_ from offset
        std::size_t bytes;
        std::size_t offset = 0;  // into owned_
    };
    std::vector<std::uint8_t> owned_;
    std::vector<Piece> pieces_;
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
    return static_cast<std::uint32_t>(::crc32_z(0, bytes.data(), bytes.size()));
}

std::size_t checkpoint_threads() { return std::clamp<std::size_t>(std::thread::hardware_concurrency() / 2, 1, 8); }

// Parts that threads of their own checksum and zlib's crc32_combine joins: a checkpoint
// of many GB is checksummed at several cores' speed (zlib's crc32: 1-2 GB/s on one).
std::uint32_t crc32_pieces(std::span<const std::span<const std::uint8_t>> pieces, std::size_t part_bytes) {
    const std::size_t kPart = std::max<std::size_t>(part_bytes, 1);
    struct Part {
        std::span<const std::uint8_t> bytes;
        uLong crc = 0;
    };
    std::vector<Part> parts;
    for (std::span<const std::uint8_t> piece : pieces)
        for (std::size_t at = 0; at < piece.size(); at += kPart) parts.push_back({piece.subspan(at, std::min(kPart, piece.size() - at))});
    run_on_own_threads(parts.size(), checkpoint_threads(),
                       [&](std::size_t i) { parts[i].crc = ::crc32_z(0, parts[i].bytes.data(), parts[i].bytes.size()); });
    uLong crc = ::crc32_z(0, nullptr, 0);
    for (const Part& part : parts) crc = ::crc32_combine(crc, part.crc, z_off_t(part.bytes.size()));
    return static_cast<std::uint32_t>(crc);
}

namespace {

// The whole file as pieces: header, then the payload's.
Writer checkpoint_pieces(const TrainState& s, std::span<const RunArrays> arrays, double* crc_seconds = nullptr) {
    if (arrays.size() != s.runs.size())
        throw std::invalid_argument("checkpoint: " + std::to_string(arrays.size()) + " runs' arrays for " +
                                    std::to_string(s.runs.size()) + " runs");
    Writer p;
    p.string(s.config_json);
    p.pod(s.step);
    p.pod(s.next_batch);
    p.array(s.skipped_batches);
    p.pod(s.rewinds);
    p.pod(static_cast<std::uint64_t>(s.runs.size()));
    for (std::size_t i = 0; i < s.runs.size(); ++i) {
        const RunState& r = s.runs[i];
        p.string(r.recipe);
        p.array(arrays[i].params);
        p.array(arrays[i].m);
        p.array(arrays[i].v);
        p.pod(r.adam_steps);
        p.array(r.recipe_state);
        p.array(r.recent_losses);
    }
    p.pod(s.world_size);
    std::uint64_t size = 0;
    for (std::span<const std::uint8_t> piece : p.spans()) size += piece.size();
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint32_t crc = crc32_pieces(p.spans());
    if (crc_seconds) *crc_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Writer file;
    file.own(kMagic, sizeof(kMagic));
    file.pod(kVersion);
    file.pod(size);
    file.pod(crc);
    file.append(std::move(p));
    return file;
}

std::vector<RunArrays> arrays_of(const TrainState& s) {
    std::vector<RunArrays> out;
    for (const RunState& r : s.runs) out.push_back({r.params, r.m, r.v});
    return out;
}

}  // namespace

std::vector<std::uint8_t> serialize_checkpoint(const TrainState& s) {
    const Writer file = checkpoint_pieces(s, arrays_of(s));
    std::vector<std::uint8_t> out;
    for (std::span<const std::uint8_t> piece : file.spans()) out.insert(out.end(), piece.begin(), piece.end());
    return out;
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

void save_checkpoint(const std::string& path, const TrainState& state, CheckpointTimes* times) {
    save_checkpoint(path, state, arrays_of(state), times);
}

void save_checkpoint(const std::string& path, const TrainState& state, std::span<const RunArrays> arrays,
                     CheckpointTimes* times) {
    CheckpointTimes t;
    const Writer file = checkpoint_pieces(state, arrays, &t.crc);
    using clock = std::chrono::steady_clock;
    auto since = [](clock::time_point from) { return std::chrono::duration<double>(clock::now() - from).count(); };
    const auto written = clock::now();
    const std::filesystem::path target(path);
    const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
    if (target.has_parent_path()) std::filesystem::create_directories(dir);
    remove_stale_temporaries(dir);
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) io_error(tmp, "cannot create checkpoint");
    for (std::span<const std::uint8_t> piece : file.spans()) {
        std::size_t done = 0;
        while (done < piece.size()) {
            const ssize_t n = ::write(fd, piece.data() + done, piece.size() - done);
            if (n < 0) {
                if (errno == EINTR) continue;
                const int saved = errno;
                ::close(fd);
                ::unlink(tmp.c_str());
                errno = saved;
                io_error(tmp, "cannot write checkpoint");
            }
            done += static_cast<std::size_t>(n);
        }
    }
    t.write = since(written);
    const auto flushed = clock::now();
    const bool synced = ::fsync(fd) == 0;  // closed either way: a failed flush must not keep the file open
    if (::close(fd) != 0 || !synced) {
        ::unlink(tmp.c_str());
        io_error(tmp, "cannot flush checkpoint");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        ::unlink(tmp.c_str());
        io_error(path, "cannot rename checkpoint into place");
    }
    // The rename itself is durable only once the directory is flushed.
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) io_error(dir.string(), "cannot open the checkpoint directory to flush it");
    const bool dir_synced = ::fsync(dir_fd) == 0;
    ::close(dir_fd);
    if (!dir_synced) io_error(dir.string(), "cannot flush the checkpoint directory");
    t.flush = since(flushed);
    if (times) *times = t;
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


namespace {

// The N of "step_N.ckpt"; -1 for other names.
long long step_of(const std::string& name) {
    constexpr std::string_view prefix = "step_", suffix = ".ckpt";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        return -1;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(digits);
}

}  // namespace

std::vector<std::string> list_checkpoints(const std::string& dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return {};
    remove_stale_temporaries(dir);
    std::vector<std::pair<long long, std::string>> found;  // step (other names: max), name
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        std::error_code file_ec;
        if (it->path().extension() != ".ckpt" || !it->is_regular_file(file_ec)) continue;
        const long long step = step_of(name);
        found.emplace_back(step < 0 ? std::numeric_limits<long long>::max() : step, name);
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> out;
    for (const auto& f : found) out.push_back((std::filesystem::path(dir) / f.second).string());
    return out;
}

NewestCheckpoint newest_checkpoint(const std::string& dir) {
    const std::vector<std::string> all = list_checkpoints(dir);
    NewestCheckpoint newest;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
        try {
            newest.state = load_checkpoint(*it);
            newest.path = *it;
            return newest;
        } catch (const std::exception& e) {
            newest.refused.push_back(e.what());
        }
    }
    std::string why = dir + ": no checkpoint that loads (";
    why += all.empty() ? "no *.ckpt file" : std::to_string(all.size()) + " refused: " + newest.refused.front();
    throw std::runtime_error(why + ")");
}

}  // namespace fp8scope
