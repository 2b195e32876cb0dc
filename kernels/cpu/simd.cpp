// Which compiled copy of simd_kernels.cpp runs: the widest the CPU supports (cpu_isa()).
#include "cpu/simd.h"

namespace fp8scope::simd {

namespace generic {
extern const Kernels table;
}
#if defined(FP8SCOPE_HAVE_AVX2)
namespace avx2 {
extern const Kernels table;
}
#endif
#if defined(FP8SCOPE_HAVE_AVX512)
namespace avx512 {
extern const Kernels table;
}
#endif

const Kernels* kernels_for(Isa isa) {
    switch (isa) {
#if defined(FP8SCOPE_HAVE_AVX512)
        case Isa::Avx512: return cpu_isa() == Isa::Avx512 ? &avx512::table : nullptr;
#endif
#if defined(FP8SCOPE_HAVE_AVX2)
        case Isa::Avx2: return cpu_isa() != Isa::Generic ? &avx2::table : nullptr;
#endif
        case Isa::Generic: return &generic::table;
        default: return nullptr;
    }
}

const Kernels& kernels() {
    static const Kernels* k = [] {
        for (Isa isa : {cpu_isa(), Isa::Avx2, Isa::Generic})
            if (const Kernels* t = kernels_for(isa)) return t;
        return &generic::table;
    }();
    return *k;
}

}  // namespace fp8scope::simd
