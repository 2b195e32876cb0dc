#include "engine/checkpoint_writer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "util/own_threads.h"
#include "util/strprintf.h"

namespace fp8scope {

CheckpointWriter::~CheckpointWriter() { wait(); }

void CheckpointWriter::wait() {
    if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::launch(std::string path, std::function<void(Done&)> save) {
    wait();
    thread_ = std::thread([this, path = std::move(path), save = std::move(save), t0 = std::chrono::steady_clock::now()] {
        Done d;
        d.path = path;
        try {
            save(d);
        } catch (const std::exception& e) {
            d.error = e.what();
        }
        d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard lock(mu_);
        done_.push_back(std::move(d));
    });
}

void CheckpointWriter::write(std::string path, TrainState state) {
    launch(path, [path, state = std::move(state)](Done& d) { save_checkpoint(path, state, &d.times); });
}

void CheckpointWriter::write(std::string path, TrainState state, HostSnapshot& snapshot, std::vector<std::size_t> sizes) {
    launch(path, [path, state = std::move(state), &snapshot, sizes = std::move(sizes),
                  t0 = std::chrono::steady_clock::now()](Done& d) {
        auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
        snapshot.wait();
        d.landed = since();
        std::vector<RunArrays> arrays;
        const auto* at = reinterpret_cast<const float*>(snapshot.host());
        for (std::size_t n : sizes) {
            arrays.push_back({{at, n}, {at + n, n}, {at + 2 * n, n}});
            at += 3 * n;
        }
        d.skipped = nonfinite_arrays(arrays);
        d.checked = since();
        if (d.skipped.empty()) save_checkpoint(path, state, arrays, &d.times);
    });
}

std::string CheckpointWriter::Done::timing() const {
    std::string s;
    if (checked > 0) s = strprintf("host copy landed at %.2f s, arrays checked by %.2f s, ", landed, checked);
    return s + strprintf("CRC %.2f s, write %.2f s, flush %.2f s, in place at %.2f s", times.crc, times.write,
                         times.flush, seconds);
}

std::vector<CheckpointWriter::Done> CheckpointWriter::finished() {
    std::lock_guard lock(mu_);
    return std::exchange(done_, {});
}

// In parts on the writer's own threads (a 2 B-parameter state is 24 GB: seconds on one
// core); the first in (run, array, index) order wins whatever the order the parts finish.
std::string nonfinite_arrays(std::span<const RunArrays> arrays, std::size_t part) {
    struct Part {
        std::size_t run;
        const char* what;
        std::span<const float> values;
        std::size_t at;               // of values' first element in its array
        std::size_t first = SIZE_MAX;  // of the part's first NaN/Inf
    };
    std::vector<Part> parts;
    part = std::max<std::size_t>(part, 1);
    for (std::size_t i = 0; i < arrays.size(); ++i) {
        const RunArrays& a = arrays[i];
        for (const auto& [values, what] : {std::pair{a.params, "parameters"}, {a.m, "AdamW m"}, {a.v, "AdamW v"}})
            for (std::size_t at = 0; at < values.size(); at += part)
                parts.push_back({i, what, values.subspan(at, std::min(part, values.size() - at)), at});
    }
    run_on_own_threads(parts.size(), checkpoint_threads(), [&](std::size_t k) {
        Part& p = parts[k];
        for (std::size_t j = 0; j < p.values.size(); ++j)
            if (!std::isfinite(p.values[j])) {
                p.first = p.at + j;
                break;
            }
    });
    for (const Part& p : parts)
        if (p.first != SIZE_MAX)
            return "run " + std::to_string(p.run) + "'s " + p.what + ": a NaN/Inf (first at " + std::to_string(p.first) + ")";
    return {};
}

}  // namespace fp8scope
