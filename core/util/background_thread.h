// Threads whose work must not take a core from training: the checkpoint writer (its
// check of the arrays, CRC and file write run for seconds next to the training thread,
// whose launches and host reads set the step time when the GPU waits for them).
#pragma once

namespace fp8scope {

// Lowers the calling thread's scheduling priority (nice 10 on Linux: per thread there,
// and inherited by threads it starts). Best effort: a failure leaves it as it was.
void lower_thread_priority();

}  // namespace fp8scope
