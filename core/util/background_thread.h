// Threads whose work must not take a core from training: the checkpoint writer (its
// check of the arrays, CRC and file write run for seconds next to the training thread,
// whose launches and host reads set the step time when the GPU waits for them).
#pragma once

#include <cstddef>
#include <functional>

namespace fp8scope {

// Lowers the calling thread's scheduling priority (nice 10 on Linux: per thread there,
// and inherited by threads it starts). Best effort: a failure leaves it as it was.
void lower_thread_priority();

// f(0), ..., f(tasks - 1) on up to `threads` threads started for the call, the caller's
// among them (they inherit its priority): for such work, which must not queue behind
// training on a shared pool. Fewer threads when the system has no more to give.
void run_on_own_threads(std::size_t tasks, std::size_t threads, const std::function<void(std::size_t)>& f);

}  // namespace fp8scope
