// Training data: a token sequence from one of three sources, split into a training part
// and a held-out tail, and the batches drawn from it.
//   builtin        the synthetic corpus of data_corpus.h, byte-level
//   text:PATH      any file, one token per byte (vocab 256)
//   tokens:PATH    GPT-2 style token file (llm.c layout): a header of 256 little-endian
//                  int32 (magic 20240520, version 1, token count, rest unused), then
//                  `count` uint16 tokens
// A bare PATH is a token file when it ends in ".bin", a text file otherwise.
// Batches are a pure function of (seed, batch index), so a data position is one integer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/train_config.h"

namespace fp8scope {

constexpr std::int32_t kTokenFileMagic = 20240520;
constexpr std::int32_t kTokenFileVersion = 1;
constexpr std::size_t kTokenFileHeaderBytes = 256 * sizeof(std::int32_t);

struct TokenData {
    std::string origin;                 // "builtin" or the file name, for messages
    std::vector<std::int32_t> tokens;
};

// Each throws std::invalid_argument naming the file and what is wrong with it.
TokenData load_text_file(const std::string& path);
TokenData load_token_file(const std::string& path, int vocab_size);
TokenData load_data(const DataConfig& config, int vocab_size);

// B sequences of T inputs; targets are the inputs shifted by one.
struct Batch {
    int B = 0, T = 0;
    std::uint64_t index = 0;            // the training batch number (eval batches: 0)
    std::vector<std::int32_t> tokens;   // (B, T)
    std::vector<std::int32_t> targets;  // (B, T)
};

class BatchSampler {
public:
    // The last `val_fraction` of the tokens is held out. Throws if either part is shorter
    // than one sequence of T + 1 tokens.
    BatchSampler(TokenData data, double val_fraction, int B, int T, std::uint64_t seed);

    // Training batch number `index`: B windows at offsets drawn uniformly from the training
    // part with a random stream keyed by (seed, index).
    void train_batch(std::uint64_t index, Batch& out) const { train_batch(index, seed_, out); }
    // The same keyed by (seed, index): another seed's batch order over the same data.
    void train_batch(std::uint64_t index, std::uint64_t seed, Batch& out) const;
    // Held-out batch `i` of `count`: the count*B windows are spread evenly over the held-out
    // part, the same for every evaluation, so eval losses compare across steps.
    void eval_batch(int i, int count, Batch& out) const;

    // Data parallel: B is the global batch and this rank's batches are rows
    // [rank * B / world, (rank + 1) * B / world) of it (rounded down: when world does not
    // divide B, ranks differ by one row, the later ones holding more), so `world` ranks
    // together see the batches one process with batch B sees. Throws
    // std::invalid_argument when a rank would get no row (world > B).
    void set_shard(int rank, int world);
    int rows() const { return rows_; }  // rows of this rank's batches
    int global_rows() const { return B_; }

    std::int64_t train_tokens() const { return n_train_; }
    std::int64_t val_tokens() const { return static_cast<std::int64_t>(data_.tokens.size()) - n_train_; }
    const TokenData& data() const { return data_; }

private:
    void fill(Batch& out, std::int64_t row, std::int64_t start) const;

    TokenData data_;
    std::int64_t n_train_ = 0;
    int B_, T_;
    std::uint64_t seed_;
    int first_ = 0, rows_;  // this rank's rows of each batch (set_shard)
};

// The rows of a batch of `global` rows that rank `rank` of `world` trains
// (BatchSampler::set_shard): their count.
int shard_rows(int global, int world, int rank);

}  // namespace fp8scope
