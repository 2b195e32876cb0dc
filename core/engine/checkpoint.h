// Training checkpoints: everything a run needs to continue bit for bit (parameters, AdamW
// moments, step, data position, recipe state, spike-detection history, config).
//
// File layout (little-endian):
//   "FP8SCKPT"  8 bytes magic
//   u32         format version (2; version 1 files, without the world size, still load)
//   u64         payload size in bytes
//   u32         CRC-32 (IEEE 802.3) of the payload
//   payload     the TrainState fields in declaration order (world_size last, an i32);
//               strings and arrays are a u64 length followed by their elements
// Files are written to a temporary name in the same directory (NAME.tmp.PID), flushed to
// disk and then renamed, so a crash never leaves a half-written checkpoint under the real
// name; the next save in the directory removes *.ckpt.tmp.PID files of dead processes.
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

std::vector<std::uint8_t> serialize_checkpoint(const TrainState& state);
// Throws std::runtime_error naming `origin` and what is wrong (magic, version, size,
// checksum, truncated field).
TrainState deserialize_checkpoint(std::span<const std::uint8_t> bytes, const std::string& origin);

void save_checkpoint(const std::string& path, const TrainState& state);
TrainState load_checkpoint(const std::string& path);

}  // namespace fp8scope
