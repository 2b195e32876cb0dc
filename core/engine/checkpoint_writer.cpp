#include "engine/checkpoint_writer.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <utility>

#include "util/background_thread.h"
#include "util/strprintf.h"

namespace fp8scope {

CheckpointWriter::~CheckpointWriter() { wait(); }

void CheckpointWriter::wait() {
    if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::launch(std::string path, std::function<void(Done&)> save) {
    wait();
    thread_ = std::thread([this, path = std::move(path), save = std::move(save), t0 = std::chrono::steady_clock::now()] {
        lower_thread_priority();  // the array check, CRC and write yield to the training thread
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

std::string nonfinite_arrays(std::span<const RunArrays> arrays) {
    for (std::size_t i = 0; i < arrays.size(); ++i) {
        const RunArrays& a = arrays[i];
        for (const auto& [values, what] : {std::pair{a.params, "parameters"}, {a.m, "AdamW m"}, {a.v, "AdamW v"}})
            for (std::size_t k = 0; k < values.size(); ++k)
                if (!std::isfinite(values[k]))
                    return "run " + std::to_string(i) + "'s " + what + ": a NaN/Inf (first at " + std::to_string(k) + ")";
    }
    return {};
}

}  // namespace fp8scope
