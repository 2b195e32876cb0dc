// The warp-level primitives of the fused attention kernels (flash.cuh):
// tensor-core MMA m16n8k16 (BF16 in, float32 accumulate), ldmatrix (plain and
// transposed), cp.async with zero fill, the fast base-2 exponential and BF16 packing.
// Every piece of inline PTX of those kernels is here and nowhere else, so that the
// kernels' index arithmetic can be exercised off the GPU by a stand-in for this header.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), g = lane / 4, t = lane % 4;
// a 32-bit register holds two BF16 values, the lower index in the low half:
//   A (16x16, row-major): a[0] = (g, 2t..2t+1)   a[1] = (g+8, 2t..)   a[2] = (g, 2t+8..)   a[3] = (g+8, 2t+8..)
//   B (16x8, k x n):      b[0] = (k 2t..2t+1, n g)                    b[1] = (k 2t+8.., n g)
//   C (16x8, float32):    c[0], c[1] = (g, 2t..2t+1)                  c[2], c[3] = (g+8, 2t..2t+1)
// ldmatrix.x4: lanes 8i..8i+7 give the row addresses of 8x8 matrix i, register i receives
// it: (row g, cols 2t..2t+1), or with .trans (rows 2t..2t+1, col g).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fp8scope::cuda::attn {

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// The block's dynamic shared memory (128-byte aligned).
__device__ __forceinline__ unsigned char* dynamic_smem() {
    extern __shared__ __align__(128) unsigned char attn_dynamic_smem[];
    return attn_dynamic_smem;
}

// d += a b (m16n8k16, BF16 x BF16 -> float32)
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ldmatrix.x4 from the shared-memory address `tile + (offset ^ flip) + add`: `flip` toggles
// the chunk bits of a swizzled byte offset, `add` moves by whole rows (flash.cuh). The address arithmetic
// sits inside the asm so that the compiler keeps one offset per operand in a register
// instead of hoisting every k-step's address out of the loops.
__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], std::uint32_t tile, std::uint32_t offset,
                                        std::uint32_t flip, std::uint32_t add) {
    asm volatile(
        "{\n .reg .b32 a;\n xor.b32 a, %5, %6;\n add.u32 a, a, %4;\n add.u32 a, a, %7;\n"
        " ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [a];\n}\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(tile), "r"(offset), "r"(flip), "r"(add));
}

__device__ __forceinline__ void ldsm_x4_trans(std::uint32_t (&r)[4], std::uint32_t tile, std::uint32_t offset,
                                              std::uint32_t flip, std::uint32_t add) {
    asm volatile(
        "{\n .reg .b32 a;\n xor.b32 a, %5, %6;\n add.u32 a, a, %4;\n add.u32 a, a, %7;\n"
        " ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [a];\n}\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(tile), "r"(offset), "r"(flip), "r"(add));
}

// 16 bytes global -> shared, of which the first `src_bytes` (0..16) are read and the rest
// zero-filled; `src` must be a valid 16-byte aligned address even when src_bytes is 0.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes));
}

// 4 bytes global -> shared, zero-filled when src_bytes is 0.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// 2^x (MUFU.EX2, relative error ~2^-22; 2^-inf = 0; subnormal results flush to zero).
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Two floats rounded to BF16 (nearest even), lo in the low half.
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
}

}  // namespace fp8scope::cuda::attn
