// Training checkpoints: everything a run needs to continue bit for bit (parameters, AdamW
// moments, step, data position, recipe state, spike-detection history, config).
//
// File layout (little-endian):
//   "FP8SCKPT"  8 bytes magic
//   u32         format version (2; version 1 files, without the world size, still load)
//   u64         payload size in bytes
//   u32         CRC-32 (IEEE 802.3, zlib's crc32) of the payload
//   payload     the TrainState fields in declaration order (world_size last, an i32);
//               strings and arrays are a u64 length followed by their elements
// Files are written to a temporary name in the same directory (NAME.tmp.PID), flushed to
// disk, renamed and the directory flushed, so a crash (kill -9, power loss) leaves either
// the whole checkpoint under its name or none: never a torn one. The next save in the
// directory and list_checkpoints remove *.ckpt.tmp.PID files of dead processes.
// load_checkpoint reads regular files only (a FIFO or a device is refused by name).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp8scope {

struct RunState {
    std::string recipe;                      // training recipe in use
    std::vector<float> params, m, v;         // master weights and AdamW moments
    std::int64_t adam_steps = 0;
    std::vector<std::uint8_t> recipe_state;  // Model::save_recipe_state()
    std::vector<float> recent_losses;        // spike-detection window, oldest first
};

struct TrainState {
    std::string config_json;                 // the run's TrainConfig
    std::int64_t step = 0;                   // steps completed
    std::uint64_t next_batch = 0;            // next training batch index
    std::vector<std::uint64_t> skipped_batches;  // batches a rewind skipped, ascending
    std::int64_t rewinds = 0;
    std::vector<RunState> runs;
    // Ranks of the job that trained it (its global batch is world_size x batch_size rows);
    // 0: not recorded (a version 1 file, a state made by hand).
    std::int32_t world_size = 0;
};

std::uint32_t crc32(std::span<const std::uint8_t> bytes);
// crc32 of `pieces` one after the other; parts of `part_bytes` are checksummed on
// threads of their own (up to 8) and combined.
std::uint32_t crc32_pieces(std::span<const std::span<const std::uint8_t>> pieces, std::size_t part_bytes = std::size_t(256) << 20);
// The threads a checkpoint's checks and checksum use: half the cores, 1 to 8.
std::size_t checkpoint_threads();

// A run's parameters and AdamW moments where they lie: a RunState's vectors, or a host
// snapshot of backend memory (asynchronous checkpoints).
struct RunArrays {
    std::span<const float> params, m, v;
};

std::vector<std::uint8_t> serialize_checkpoint(const TrainState& state);
// Throws std::runtime_error naming `origin` and what is wrong (magic, version, size,
// checksum, truncated field).
TrainState deserialize_checkpoint(std::span<const std::uint8_t> bytes, const std::string& origin);

// Where a save's time went, in seconds: the checksum, the write, the flush to the disk.
struct CheckpointTimes {
    double crc = 0, write = 0, flush = 0;
};
void save_checkpoint(const std::string& path, const TrainState& state, CheckpointTimes* times = nullptr);
// The same with each run's arrays taken from `arrays` (one per run; the RunStates' own
// are not read), written from where they lie without a copy of the whole file.
void save_checkpoint(const std::string& path, const TrainState& state, std::span<const RunArrays> arrays,
                     CheckpointTimes* times = nullptr);
TrainState load_checkpoint(const std::string& path);

// The checkpoints in `dir`: its regular *.ckpt files, by step (the N of step_N.ckpt;
// other names after them, by name). Temporaries (*.ckpt.tmp.PID) are never listed, and
// those of dead processes are removed. A missing directory lists none.
std::vector<std::string> list_checkpoints(const std::string& dir);
// The newest checkpoint of `dir` that loads and verifies, and what it holds; `refused`:
// the load errors of the newer ones that do not (each names its file). Throws std::runtime_error
// naming the directory when none does.
struct NewestCheckpoint {
    std::string path;
    TrainState state;
    std::vector<std::string> refused;
};
NewestCheckpoint newest_checkpoint(const std::string& dir);

}  // namespace fp8scope
