// Launchers of the fused attention kernels (flash.cuh) for head sizes 64
// and 128; attention.cu decides when they run.
#include "cuda/ops/attention/flash.cuh"
#include "cuda/ops/attention/internal.h"
#include "cuda/ops/common.cuh"

namespace fp8scope::cuda::detail {
namespace {

using namespace attn;

template <class Kernel>
void allow_smem(Kernel kernel, int bytes) {
    // Above 48 KB a kernel needs the opt-in; cheap enough to repeat on every launch (and
    // right for every device the process uses).
    FP8SCOPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

int scale_hs(const FlashArgs& a) { return a.scale_hs > 0 ? a.scale_hs : a.hs; }

template <int D>
void forward(const FlashArgs& a, cudaStream_t stream) {
    using Tr = FwdTraits<D>;
    const FwdParams p{a.qkv, a.out, a.lse, a.T, a.C, a.NH, a.NKV, kLog2e / std::sqrt(float(scale_hs(a)))};
    const dim3 grid(unsigned(a.B) * unsigned(a.NH), unsigned((a.T + Tr::kBlockM - 1) / Tr::kBlockM));
    allow_smem(flash_forward_kernel<D>, Tr::kSmemBytes);
    flash_forward_kernel<D><<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
    FP8SCOPE_CUDA_LAUNCHED();
}

template <int D>
void backward(const FlashArgs& a, cudaStream_t stream) {
    const float scale = 1.0f / std::sqrt(float(scale_hs(a)));
    BwdParams p{};
    p.qkv = a.qkv;
    p.out = a.out;
    p.dout = a.dout;
    p.lse = a.lse;
    p.dqkv = a.dqkv;
    p.dsum = a.dsum;
    p.ds = a.ds;
    p.rows = std::int64_t(a.B) * a.T;
    p.tiles_per_head = flash_ds_tiles_per_head(a.T);
    p.T = a.T;
    p.C = a.C;
    p.NH = a.NH;
    p.NKV = a.NKV;
    p.scale = scale;
    p.scale_log2 = kLog2e * scale;
    const unsigned heads = unsigned(a.B) * unsigned(a.NH), kv_heads = unsigned(a.B) * unsigned(a.NKV);

    const std::int64_t lanes = p.rows * a.NH * (D / 8);
    flash_backward_dot_kernel<D><<<blocks_for(lanes, 256), 256, 0, stream>>>(p);
    FP8SCOPE_CUDA_LAUNCHED();

    using Kv = BwdKvTraits<D>;
    allow_smem(flash_backward_kv_kernel<D>, Kv::kSmemBytes);
    flash_backward_kv_kernel<D>
        <<<dim3(kv_heads, unsigned(ds_key_blocks(a.T))), Kv::kThreads, Kv::kSmemBytes, stream>>>(p);
    FP8SCOPE_CUDA_LAUNCHED();

    using Q = BwdQTraits<D>;
    allow_smem(flash_backward_q_kernel<D>, Q::kSmemBytes);
    flash_backward_q_kernel<D>
        <<<dim3(heads, unsigned((a.T + Q::kBlockM - 1) / Q::kBlockM)), Q::kThreads, Q::kSmemBytes, stream>>>(p);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace

std::int64_t flash_ds_tiles_per_head(int T) {
    return ds_tile_index(ds_query_tiles(T), ds_key_blocks(T), 2 * ds_key_blocks(T));
}

void flash_forward(const FlashArgs& a, cudaStream_t stream) {
    if (a.hs == 128) forward<128>(a, stream);
    else if (a.hs == 64) forward<64>(a, stream);
    else throw std::invalid_argument("cuda attention: no fused kernel for head size " + std::to_string(a.hs));
}

void flash_backward(const FlashArgs& a, cudaStream_t stream) {
    if (a.hs == 128) backward<128>(a, stream);
    else if (a.hs == 64) backward<64>(a, stream);
    else throw std::invalid_argument("cuda attention: no fused kernel for head size " + std::to_string(a.hs));
}

}  // namespace fp8scope::cuda::detail
