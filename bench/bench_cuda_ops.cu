// Per-op timings of the CUDA layer ops and optimizer (kernels/cuda/ops/ops.h) at the shape of
// the performance target: a GPT layer of d_model 4096, sequence 2048, batch 4, 32 heads,
// vocabulary 50304 (B=4, T=2048, C=4096, NH=32, V=50304; MLP hidden 4C for GELU, 11008
// for SwiGLU; AdamW over 2^28 parameters). Bandwidth-bound ops print the bytes they must
// move and the achieved GB/s next to a device-to-device copy measured in the same run;
// attention prints TFLOP/s of its causal work: forward 2 products (Q K^T, P V), backward
// 4 (the model's: dV, dP, dQ, dK) and 5 counting the recomputed Q K^T (FlashAttention's
// convention), each 2 B NH T (T+1)/2 hs FLOPs; with hs = 128 it also times hs = 64 at the
// same C. Median of 20 timed runs after 3 warm-up runs, random inputs.
// Usage: bench_cuda_ops [B T C NH V]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda/ops/ops.h"
#include "cuda/runtime/check.h"
#include "cuda_bench.cuh"

namespace {

using fp8scope::cuda::bf16;
using fp8scope::cuda::Workspace;

__device__ float hash_uniform(std::uint64_t i, std::uint32_t seed) {  // [-1, 1)
    std::uint64_t x = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return float(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_bf16(bf16* p, std::int64_t n, std::uint32_t seed, float scale, float offset) {
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
        const float f = hash_uniform(std::uint64_t(i), seed) * scale + offset;
        const std::uint32_t u = __float_as_uint(f);
        p[i] = bf16((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

__global__ void fill_f32(float* p, std::int64_t n, std::uint32_t seed, float scale, float offset) {
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x)
        p[i] = hash_uniform(std::uint64_t(i), seed) * scale + offset;
}

__global__ void fill_index(std::int32_t* p, std::int64_t n, std::uint32_t seed, int range) {
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x)
        p[i] = int((hash_uniform(std::uint64_t(i), seed) * 0.5f + 0.5f) * float(range)) % range;
}

template <class T>
T* device(std::size_t n) {
    T* p = nullptr;
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)));
    return p;
}

std::uint32_t next_seed = 1;
bf16* random_bf16(std::size_t n, float scale = 1.0f, float offset = 0.0f) {
    bf16* p = device<bf16>(n);
    fill_bf16<<<1024, 256>>>(p, std::int64_t(n), next_seed++, scale, offset);
    FP8SCOPE_CUDA_LAUNCHED();
    return p;
}
float* random_f32(std::size_t n, float scale = 1.0f, float offset = 0.0f) {
    float* p = device<float>(n);
    fill_f32<<<1024, 256>>>(p, std::int64_t(n), next_seed++, scale, offset);
    FP8SCOPE_CUDA_LAUNCHED();
    return p;
}

struct Timer {
    cudaStream_t stream;
    double copy_gbs = 0;  // the ceiling measured in this run

    // Median milliseconds of fn over 20 runs after 3 warm-ups.
    double median_ms(const std::function<void()>& fn) { return fp8scope::bench::median_ms(stream, 20, fn); }

    double bandwidth(const char* name, double bytes, const std::function<void()>& fn) {
        const double ms = median_ms(fn);
        const double gbs = bytes / (ms * 1e-3) / 1e9;
        std::printf("%-34s %9.3f ms %10.1f GB/s %5.0f%% of copy\n", name, ms, gbs,
                    copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 0.0);
        return ms;
    }

    // Causal attention: `products` T x T x hs matrix products over the causal half (each
    // 2 B NH T (T+1)/2 hs FLOPs); `alt` > 0 prints the rate for that many too.
    double attention(const char* name, double one_product, int products, int alt, const std::function<void()>& fn) {
        const double ms = median_ms(fn);
        const double tf = one_product / (ms * 1e-3) / 1e12;
        std::printf("%-34s %9.3f ms %10.1f TFLOP/s (%d causal products", name, ms, products * tf, products);
        if (alt > 0) std::printf("; %.1f counting %d", alt * tf, alt);
        std::printf(")\n");
        return ms;
    }
};

}  // namespace

int main(int argc, char** argv) {
    namespace ops = fp8scope::cuda;
    int B = 4, T = 2048, C = 4096, NH = 32, V = 50304;
    if (argc == 6) B = std::atoi(argv[1]), T = std::atoi(argv[2]), C = std::atoi(argv[3]), NH = std::atoi(argv[4]),
                   V = std::atoi(argv[5]);
    const int H = 11008;                         // SwiGLU hidden width
    const std::int64_t N = std::int64_t(B) * T;  // rows
    const std::int64_t NC = N * C, N4C = N * 4 * C, NH2 = N * H, NV = N * V;
    const std::int64_t P = std::int64_t(1) << 28;  // AdamW parameters
    const int hs = C / NH;

    cudaDeviceProp prop{};
    FP8SCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s (%d SMs)\nshape: B=%d T=%d C=%d NH=%d hs=%d V=%d H=%d, AdamW over %lld parameters\n\n",
                prop.name, prop.multiProcessorCount, B, T, C, NH, hs, V, H, static_cast<long long>(P));

    cudaStream_t stream;
    FP8SCOPE_CUDA_CHECK(cudaStreamCreate(&stream));
    Timer timer{stream};

    // The ceiling: a device-to-device copy of 1 GiB (read + write counted).
    {
        const std::size_t bytes = std::size_t(1) << 30;
        void* a = device<unsigned char>(bytes);
        void* b = device<unsigned char>(bytes);
        const double ms = timer.median_ms(
            [&] { FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream)); });
        timer.copy_gbs = 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
        std::printf("%-34s %9.3f ms %10.1f GB/s\n", "device-to-device copy 1 GiB", ms, timer.copy_gbs);
        FP8SCOPE_CUDA_CHECK(cudaFree(a));
        FP8SCOPE_CUDA_CHECK(cudaFree(b));
    }

    std::size_t ws_bytes = std::max({ops::embedding_backward_workspace(B, T), ops::norm_backward_workspace(N, C),
                                     ops::attention_forward_workspace(B, T, C, NH, NH),
                                     ops::attention_backward_workspace(B, T, C, NH, NH),
                                     ops::attention_backward_workspace(B, T, C, C / 64, C / 64),
                                     ops::attention_backward_workspace(B, T, C, NH, std::max(1, NH / 4)),
                                     ops::bias_backward_workspace(N, 4 * C), ops::grad_norm_workspace(P)});
    const Workspace ws{device<unsigned char>(ws_bytes), ws_bytes};

    // --- embedding ---
    auto* tokens = device<std::int32_t>(std::size_t(N));
    fill_index<<<256, 256>>>(tokens, N, 7, V);
    FP8SCOPE_CUDA_LAUNCHED();
    float* wte = random_f32(std::size_t(V) * C, 0.02f);
    float* wpe = random_f32(std::size_t(T) * C, 0.01f);
    bf16* x = random_bf16(std::size_t(NC));
    bf16* y = random_bf16(std::size_t(NC));
    bf16* dy = random_bf16(std::size_t(NC));
    bf16* dx = random_bf16(std::size_t(NC), 0.1f);
    const double nc = double(NC);
    double layer_ms = 0;  // the non-GEMM ops of one pre-norm GELU layer, forward and backward
    timer.bandwidth("embedding_forward", nc * (8 + 2),
                    [&] { ops::embedding_forward(x, tokens, wte, wpe, B, T, C, stream); });
    float* dwte = random_f32(std::size_t(V) * C, 0.0f);
    float* dwpe = random_f32(std::size_t(T) * C, 0.0f);
    timer.bandwidth("embedding_backward (~bytes)", nc * 2 * 2 + double(T) * C * 8 + nc * 8,
                    [&] { ops::embedding_backward(dwte, dwpe, dy, tokens, B, T, C, ws, stream); });

    // --- norms ---
    float* w = random_f32(std::size_t(C), 0.5f, 1.0f);
    float* bias = random_f32(std::size_t(C), 0.5f);
    float* mean = device<float>(std::size_t(N));
    float* rstd = device<float>(std::size_t(N));
    float* dw = device<float>(std::size_t(C));
    float* db = device<float>(std::size_t(C));
    layer_ms += 2 * timer.bandwidth("layernorm_forward", nc * 4,
                                    [&] { ops::layernorm_forward(y, mean, rstd, x, w, bias, N, C, stream); });
    layer_ms += 2 * timer.bandwidth("layernorm_backward", nc * 8, [&] {
        ops::layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C, ws, stream);
    });
    timer.bandwidth("rmsnorm_forward", nc * 4, [&] { ops::rmsnorm_forward(y, rstd, x, w, N, C, stream); });
    timer.bandwidth("rmsnorm_backward", nc * 8,
                    [&] { ops::rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C, ws, stream); });

    // --- elementwise ---
    layer_ms += 2 * timer.bandwidth("add (residual)", nc * 6, [&] { ops::add(y, x, dx, NC, stream); });
    layer_ms += 5 * timer.bandwidth("bias_backward (N,C) bf16", nc * 2,
                                    [&] { ops::bias_backward(db, dy, N, C, ws, stream); });
    FP8SCOPE_CUDA_CHECK(cudaFree(dx));
    FP8SCOPE_CUDA_CHECK(cudaFree(y));

    // --- attention ---
    {
        bf16* qkv = random_bf16(std::size_t(N) * 3 * C, 2.0f);
        bf16* dqkv = device<bf16>(std::size_t(N) * 3 * C);
        std::vector<int> heads = {NH};
        if (hs == 128 && C % 64 == 0) heads.push_back(C / 64);
        // Multi-head, then grouped-query attention with 4 query heads per key/value head
        // (its qkv rows are narrower: the same buffers hold them).
        for (const int nh : heads)
            for (const int group : {1, 4}) {
                if (nh % group != 0) continue;
                const int nkv = nh / group;
                bf16* att = device<bf16>(std::size_t(ops::attention_saved(B, T, nh)));
                const double one = 2.0 * B * C * (double(T) * (T + 1) / 2);  // = 2 B nh T(T+1)/2 (C/nh)
                const std::string kind = "hs=" + std::to_string(C / nh) + (group > 1 ? " gqa 4:1" : "");
                const std::string f = "attention_forward " + kind, b = "attention_backward " + kind;
                const double fms = timer.attention(f.c_str(), one, 2, 0, [&] {
                    ops::attention_forward(x, att, qkv, B, T, C, nh, nkv, ws, stream);
                });
                const double bms = timer.attention(b.c_str(), one, 4, 5, [&] {
                    ops::attention_backward(dqkv, dy, qkv, x, att, B, T, C, nh, nkv, ws, stream);
                });
                if (nh == NH && group == 1) layer_ms += fms + bms;
                FP8SCOPE_CUDA_CHECK(cudaFree(att));
            }
        // RoPE on q and k of the GQA 4:1 layout, in place (read and write once)
        if (NH % 4 == 0 && hs % 2 == 0) {
            float* table = random_f32(std::size_t(T) * hs, 1.0f);
            timer.bandwidth("rope (q, k of gqa 4:1)", double(N) * (NH + NH / 4) * hs * 4,
                            [&] { ops::rope(qkv, table, B, T, NH, NH / 4, hs, false, stream); });
            FP8SCOPE_CUDA_CHECK(cudaFree(table));
        }
        FP8SCOPE_CUDA_CHECK(cudaFree(qkv));
        FP8SCOPE_CUDA_CHECK(cudaFree(dqkv));
    }

    // --- activations ---
    {
        bf16* h = random_bf16(std::size_t(N4C), 3.0f);
        bf16* g = random_bf16(std::size_t(N4C));
        bf16* dh = random_bf16(std::size_t(N4C));
        const double n4 = double(N4C);
        layer_ms += timer.bandwidth("gelu_forward (N,4C)", n4 * 4, [&] { ops::gelu_forward(g, h, N4C, stream); });
        layer_ms += timer.bandwidth("gelu_backward (N,4C)", n4 * 6,
                                    [&] { ops::gelu_backward(dh, h, g, N4C, stream); });
        layer_ms += timer.bandwidth("bias_backward (N,4C) bf16", n4 * 2,
                                        [&] { ops::bias_backward(db, dh, N, 4 * C, ws, stream); });
        FP8SCOPE_CUDA_CHECK(cudaFree(h));
        FP8SCOPE_CUDA_CHECK(cudaFree(g));
        FP8SCOPE_CUDA_CHECK(cudaFree(dh));
    }
    {
        bf16* in = random_bf16(std::size_t(NH2) * 2, 3.0f);
        bf16* din = device<bf16>(std::size_t(NH2) * 2);
        bf16* out = random_bf16(std::size_t(NH2));
        float* scales = device<float>(std::size_t(H));
        const double nh = double(NH2);
        timer.bandwidth("swiglu_forward (N,H)", nh * 6, [&] { ops::swiglu_forward(out, in, N, H, stream); });
        timer.bandwidth("swiglu_backward (N,H)", nh * 10,
                        [&] { ops::swiglu_backward(din, in, out, N, H, stream); });
        timer.bandwidth("smooth_swiglu_scales (N,H)", nh * 2,
                        [&] { ops::smooth_swiglu_scales(scales, out, N, H, stream); });
        timer.bandwidth("scale_columns bf16 (N,H)", nh * 4,
                        [&] { ops::scale_columns(out, out, scales, false, N, H, stream); });
        FP8SCOPE_CUDA_CHECK(cudaFree(in));
        FP8SCOPE_CUDA_CHECK(cudaFree(din));
        FP8SCOPE_CUDA_CHECK(cudaFree(out));
        FP8SCOPE_CUDA_CHECK(cudaFree(scales));
    }

    // --- softmax cross-entropy ---
    {
        bf16* logits = random_bf16(std::size_t(NV), 4.0f);
        auto* targets = device<std::int32_t>(std::size_t(N));
        fill_index<<<256, 256>>>(targets, N, 9, V);
        FP8SCOPE_CUDA_LAUNCHED();
        float* losses = device<float>(std::size_t(N));
        float* mean_loss = device<float>(1);
        const double nv = double(NV);
        timer.bandwidth("softmax_ce_forward (in place)", nv * 4,
                        [&] { ops::softmax_ce_forward(logits, losses, logits, targets, N, V, stream); });
        timer.bandwidth("softmax_ce_backward (in place)", nv * 4,
                        [&] { ops::softmax_ce_backward(logits, logits, targets, N, V, stream); });
        timer.bandwidth("mean_loss", double(N) * 4, [&] { ops::mean_loss(mean_loss, losses, N, stream); });
        FP8SCOPE_CUDA_CHECK(cudaFree(logits));
        FP8SCOPE_CUDA_CHECK(cudaFree(targets));
        FP8SCOPE_CUDA_CHECK(cudaFree(losses));
        FP8SCOPE_CUDA_CHECK(cudaFree(mean_loss));
    }

    // --- optimizer ---
    {
        float* p = random_f32(std::size_t(P));
        float* g = random_f32(std::size_t(P), 1e-3f);
        float* m = random_f32(std::size_t(P), 1e-3f);
        float* v = random_f32(std::size_t(P), 1e-6f, 1e-6f);
        // 64 tensors with decay between 64 without, as a model's matrices and norms
        std::vector<fp8scope::DecayRun> runs;
        for (std::int64_t t = 0; t < 64; ++t) runs.push_back({t * (P / 64), t * (P / 64) + P / 64 - 4096});
        auto* decay = device<fp8scope::DecayRun>(runs.size());
        FP8SCOPE_CUDA_CHECK(
            cudaMemcpy(decay, runs.data(), runs.size() * sizeof(fp8scope::DecayRun), cudaMemcpyHostToDevice));
        double* norm = device<double>(1);
        fp8scope::AdamWParams ap;
        ap.lr = 1e-4f;
        ap.weight_decay = 0.1f;
        const double pn = double(P);
        timer.bandwidth("adamw", pn * (16 + 12),
                        [&] { ops::adamw(p, g, m, v, decay, std::int64_t(runs.size()), P, ap, stream); });
        timer.bandwidth("grad_norm", pn * 4, [&] { ops::grad_norm(norm, g, P, ws, stream); });
        timer.bandwidth("scale", pn * 8, [&] { ops::scale(g, 0.999f, P, stream); });
    }

    std::printf("\nnon-GEMM ops of one pre-norm GELU layer, forward + backward (2 LN, 2 residual adds,\n"
                "attention, GELU, bias gradients of 9C columns): %.3f ms; x8 layers: %.2f ms\n",
                layer_ms, 8 * layer_ms);
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
    return 0;
}
