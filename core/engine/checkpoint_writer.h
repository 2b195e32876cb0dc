// Checkpoints written on a thread of their own, so training goes on while the file is
// written. With a host snapshot (backend/device_memory.h) the trainer only starts the copy
// of the parameters and moments (a GPU's runs on a side stream while the next steps
// train); this thread waits for it to land, checks the arrays are finite, and writes them
// from the snapshot's buffer next to the destination, then renames the file into place.
// One write at a time: asking for the next while one runs waits for it, so a slow file
// system slows training rather than piling up copies of the state.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/device_memory.h"
#include "engine/checkpoint.h"

namespace fp8scope {

class CheckpointWriter {
public:
    CheckpointWriter() = default;
    ~CheckpointWriter();  // waits for the write in flight
    CheckpointWriter(const CheckpointWriter&) = delete;
    CheckpointWriter& operator=(const CheckpointWriter&) = delete;

    // `state` with its arrays.
    void write(std::string path, TrainState state);
    // `state` without its runs' arrays: they are `snapshot`'s host copy, per run its
    // parameters, m and v of sizes[run] floats each, back to back. The snapshot must not be
    // started again before wait() (or the next write) returns.
    void write(std::string path, TrainState state, HostSnapshot& snapshot, std::vector<std::size_t> sizes);

    struct Done {
        std::string path;
        std::string error;    // empty: written
        std::string skipped;  // not empty: not written, the arrays held a NaN/Inf (where)
        double seconds = 0;   // from the request to the file in place
        // From the request: the arrays on the host, then checked for NaN/Inf (with a
        // snapshot); and the save's own times.
        double landed = 0, checked = 0;
        CheckpointTimes times;
        // "host copy landed at 0.46 s, arrays checked by 1.17 s, CRC 1.00 s, write 7.95 s,
        // flush 0.00 s, in place at 10.12 s"
        std::string timing() const;
    };
    // The writes finished since the last call, oldest first.
    std::vector<Done> finished();
    void wait();

private:
    // Runs `save` (which fills Done's error or skipped) on the thread.
    void launch(std::string path, std::function<void(Done&)> save);

    std::thread thread_;
    std::mutex mu_;
    std::vector<Done> done_;
};

// "run 0's parameters: a NaN/Inf (first at 1234)" for the first array holding one; empty
// when all are finite. Checked in parts of `part` floats on up to checkpoint_threads().
std::string nonfinite_arrays(std::span<const RunArrays> arrays, std::size_t part = std::size_t(64) << 20);

}  // namespace fp8scope
