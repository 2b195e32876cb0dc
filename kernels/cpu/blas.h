// The CPU backend's BLAS (OpenBLAS) with its GEMM kernel chosen from the CPU's features.
//
// OpenBLAS as distributions ship it (DYNAMIC_ARCH) picks its kernels when the library
// loads, from a table of CPU models it knows. A model newer than the library falls back
// to a generic SSE kernel ("Prescott"): Debian 12's 0.3.21 on a family 6 model 207 Xeon
// runs sgemm at a quarter of the speed of its AVX-512 kernel. OPENBLAS_CORETYPE overrides
// the choice, but OpenBLAS reads it only at load. So at first use init() compares the
// kernel OpenBLAS chose with the vector ISA the CPU reports and, when the kernel is
// weaker, runs OpenBLAS's own selection again with OPENBLAS_CORETYPE set
// (gotoblas_dynamic_quit/init, exported by DYNAMIC_ARCH builds): what setting the
// variable before start would have done. A user's OPENBLAS_CORETYPE is always kept.
// docs/cpu-backend.md has the measurements behind this choice.
#pragma once

#include <string>
#include <vector>

namespace fp8scope::blas {

struct KernelChoice {
    std::string kernel;    // the kernel GEMMs run on: "SkylakeX", "Cooperlake", "Haswell", ...
    std::string detected;  // what OpenBLAS chose when it loaded
    std::string reason;    // "detected by OpenBLAS", "OPENBLAS_CORETYPE", "chosen from the CPU's features (...)"
};

// Chooses the kernel once (thread-safe; later calls return the first result). Called by
// the CPU backend and by the first sgemm; must not run while another thread is in a GEMM.
const KernelChoice& init();

// The OpenBLAS kernels this CPU can run that this library has, best first
// ({"Cooperlake", "SkylakeX", "Haswell", "Sandybridge", "Prescott"} on an AVX-512 BF16 CPU).
std::vector<std::string> runnable_kernels();

// Benchmarks: switches every later GEMM to `kernel` (one of runnable_kernels()); false
// when this OpenBLAS cannot switch. No GEMM may run meanwhile.
bool use_kernel(const std::string& kernel);
std::string current_kernel();

// "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..., kernel SkylakeX (chosen from the CPU's
// features; OpenBLAS detected Prescott)".
std::string description();

}  // namespace fp8scope::blas
