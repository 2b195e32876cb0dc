// Threads of their own for work beside training: the checkpoint writer's check of the
// arrays and its CRC, seconds long for a large state.
#pragma once

#include <cstddef>
#include <functional>

namespace fp8scope {

// f(0), ..., f(tasks - 1) on up to `threads` threads started for the call, the caller's
// among them (fewer when the system has no more to give): such work must not queue
// behind training on a shared pool.
void run_on_own_threads(std::size_t tasks, std::size_t threads, const std::function<void(std::size_t)>& f);

}  // namespace fp8scope
