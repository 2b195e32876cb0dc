// Loading the three data sources and drawing batches.
#include "engine/data.h"

#include <cstring>
#include <stdexcept>

#include "engine/data_corpus.h"
#include "engine/rng.h"
#include "io/input_file.h"

namespace fp8scope {
namespace {

std::int32_t read_le32(const char* p) {
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    return static_cast<std::int32_t>(std::uint32_t(b[0]) | std::uint32_t(b[1]) << 8 |
                                     std::uint32_t(b[2]) << 16 | std::uint32_t(b[3]) << 24);
}

}  // namespace

TokenData load_text_file(const std::string& path) {
    // Regular files only (read_regular_file): a FIFO or a device would hang the start.
    std::string bytes = read_regular_file(path, "text file");
    if (bytes.empty()) throw std::invalid_argument(path + ": text file is empty");
    TokenData d{path, {}};
    d.tokens.reserve(bytes.size());
    for (char c : bytes) d.tokens.push_back(static_cast<unsigned char>(c));
    return d;
}

TokenData load_token_file(const std::string& path, int vocab_size) {
    std::string bytes = read_regular_file(path, "token file");
    if (bytes.size() < kTokenFileHeaderBytes)
        throw std::invalid_argument(path + ": token file of " + std::to_string(bytes.size()) +
                                    " bytes is shorter than its 1024-byte header");
    std::int32_t magic = read_le32(bytes.data()), version = read_le32(bytes.data() + 4),
                 count = read_le32(bytes.data() + 8);
    if (magic != kTokenFileMagic)
        throw std::invalid_argument(path + ": token file header has magic " + std::to_string(magic) +
                                    ", expected " + std::to_string(kTokenFileMagic));
    if (version != kTokenFileVersion)
        throw std::invalid_argument(path + ": token file version " + std::to_string(version) +
                                    " is not supported (expected " + std::to_string(kTokenFileVersion) + ")");
    std::size_t payload = bytes.size() - kTokenFileHeaderBytes;
    if (count <= 0 || payload != 2 * static_cast<std::size_t>(count))
        throw std::invalid_argument(path + ": token file header says " + std::to_string(count) +
                                    " tokens but the file holds " + std::to_string(payload) +
                                    " bytes of tokens (" + std::to_string(payload / 2) + " tokens)");
    TokenData d{path, std::vector<std::int32_t>(static_cast<std::size_t>(count))};
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + kTokenFileHeaderBytes);
    for (std::int32_t i = 0; i < count; ++i) {
        std::int32_t token = p[2 * i] | p[2 * i + 1] << 8;
        if (token >= vocab_size)
            throw std::invalid_argument(path + ": token " + std::to_string(token) + " at position " +
                                        std::to_string(i) + " is outside the vocabulary (model.vocab_size " +
                                        std::to_string(vocab_size) + ")");
        d.tokens[static_cast<std::size_t>(i)] = token;
    }
    return d;
}

TokenData load_data(const DataConfig& config, int vocab_size) {
    const std::string& s = config.source;
    if (s == "builtin") {
        std::string text = builtin_corpus(config.corpus_bytes, config.corpus_seed);
        return TokenData{"builtin", std::vector<std::int32_t>(text.begin(), text.end())};
    }
    if (s.rfind("text:", 0) == 0) return load_text_file(s.substr(5));
    if (s.rfind("tokens:", 0) == 0) return load_token_file(s.substr(7), vocab_size);
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".bin") == 0) return load_token_file(s, vocab_size);
    return load_text_file(s);
}

BatchSampler::BatchSampler(TokenData data, double val_fraction, int B, int T, std::uint64_t seed)
    : data_(std::move(data)), B_(B), T_(T), seed_(seed), rows_(B) {
    auto n = static_cast<std::int64_t>(data_.tokens.size());
    std::int64_t n_val = static_cast<std::int64_t>(static_cast<double>(n) * val_fraction);
    n_train_ = n - n_val;
    if (n_train_ < T + 1 || n_val < T + 1)
        throw std::invalid_argument(data_.origin + ": " + std::to_string(n) + " tokens give " +
                                    std::to_string(n_train_) + " for training and " + std::to_string(n_val) +
                                    " held out; each part needs at least seq_len + 1 = " +
                                    std::to_string(T + 1));
}

void BatchSampler::fill(Batch& out, std::int64_t row, std::int64_t start) const {
    const std::int32_t* src = data_.tokens.data() + start;
    std::memcpy(out.tokens.data() + row * T_, src, sizeof(std::int32_t) * static_cast<std::size_t>(T_));
    std::memcpy(out.targets.data() + row * T_, src + 1, sizeof(std::int32_t) * static_cast<std::size_t>(T_));
}

int shard_rows(int global, int world, int rank) {
    return int(std::int64_t(rank + 1) * global / world - std::int64_t(rank) * global / world);
}

void BatchSampler::set_shard(int rank, int world) {
    if (world < 1 || rank < 0 || rank >= world || B_ < world)
        throw std::invalid_argument("batch of " + std::to_string(B_) + " rows cannot be split over " +
                                    std::to_string(world) + " ranks (each needs a row at least)");
    first_ = int(std::int64_t(rank) * B_ / world);
    rows_ = shard_rows(B_, world, rank);
}

void BatchSampler::train_batch(std::uint64_t index, std::uint64_t seed, Batch& out) const {
    out.B = rows();
    out.T = T_;
    out.index = index;
    out.tokens.resize(static_cast<std::size_t>(out.B) * T_);
    out.targets.resize(out.tokens.size());
    Rng rng(seed, index);
    const auto starts = static_cast<std::uint64_t>(n_train_ - T_);  // window [s, s + T] inside
    const int first = first_;
    for (int b = 0; b < B_; ++b) {  // every rank draws the whole batch: the same stream
        const auto start = static_cast<std::int64_t>(rng.below(starts));
        if (b >= first && b < first + out.B) fill(out, b - first, start);
    }
}

void BatchSampler::eval_batch(int i, int count, Batch& out) const {
    out.B = rows();
    out.T = T_;
    out.index = 0;
    out.tokens.resize(static_cast<std::size_t>(out.B) * T_);
    out.targets.resize(out.tokens.size());
    const std::int64_t windows = std::int64_t(count) * B_, span = val_tokens() - T_ - 1;
    for (int b = 0; b < out.B; ++b) {
        std::int64_t k = std::int64_t(i) * B_ + first_ + b;
        std::int64_t offset = windows > 1 ? k * span / (windows - 1) : 0;
        fill(out, b, n_train_ + offset);
    }
}

}  // namespace fp8scope
