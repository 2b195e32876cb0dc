// Float64 reference forwards of the engine's layer ops and of the whole model, written
// from the textbook formulas and independent of core/engine: the oracle of the gradient
// checks (central differences of these) and of the forward values.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/model.h"

namespace fp8scope::ref {

using Vec = std::vector<double>;

// wpe empty: no position table (rotary positions).
inline Vec embedding(const std::vector<std::int32_t>& tok, const Vec& wte, const Vec& wpe, int B, int T, int C) {
    Vec out(std::size_t(B) * T * C);
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t)
            for (int c = 0; c < C; ++c)
                out[(std::size_t(b) * T + t) * C + c] = wte[std::size_t(tok[b * T + t]) * C + c] +
                                                        (wpe.empty() ? 0.0 : wpe[std::size_t(t) * C + c]);
    return out;
}

// RoPE of one head's vector x (hs) at position t, half-split pairing: (x[i], x[i + hs/2])
// turned by t * theta^(-2i/hs).
inline Vec rotate(const double* x, int hs, int t, double theta) {
    Vec out(std::size_t(hs), 0.0);
    for (int i = 0; i < hs / 2; ++i) {
        const double a = t * std::pow(theta, -2.0 * i / hs), c = std::cos(a), s = std::sin(a);
        out[std::size_t(i)] = x[i] * c - x[i + hs / 2] * s;
        out[std::size_t(i + hs / 2)] = x[i + hs / 2] * c + x[i] * s;
    }
    return out;
}

// bias empty: RMSNorm-style affine without shift; rms true: RMSNorm.
inline Vec norm(const Vec& x, const Vec& w, const Vec& bias, std::size_t N, std::size_t C, bool rms) {
    Vec out(N * C);
    for (std::size_t n = 0; n < N; ++n) {
        double mean = 0, var = 0;
        if (!rms) {
            for (std::size_t c = 0; c < C; ++c) mean += x[n * C + c];
            mean /= double(C);
        }
        for (std::size_t c = 0; c < C; ++c) var += (x[n * C + c] - mean) * (x[n * C + c] - mean);
        double rstd = 1.0 / std::sqrt(var / double(C) + 1e-5);
        for (std::size_t c = 0; c < C; ++c)
            out[n * C + c] = (x[n * C + c] - mean) * rstd * w[c] + (bias.empty() ? 0.0 : bias[c]);
    }
    return out;
}

// Causal attention over qkv (B,T,C + 2 NKV hs) = [q | k | v] with NKV key/value heads
// (0: NH); query head h reads key/value head h / (NH / NKV). theta > 0: q and k rotated
// first (rotate()).
inline Vec attention(const Vec& qkv, int B, int T, int C, int NH, int NKV = 0, double theta = 0) {
    if (NKV == 0) NKV = NH;
    const int hs = C / NH, W = C + 2 * NKV * hs;
    Vec out(std::size_t(B) * T * C, 0.0);
    auto at = [&](int b, int t, int col) { return &qkv[(std::size_t(b) * T + t) * W + col]; };
    auto head = [&](int b, int t, int col) {  // one head's vector, rotated for q and k under RoPE
        return theta > 0 ? rotate(at(b, t, col), hs, t, theta) : Vec(at(b, t, col), at(b, t, col) + hs);
    };
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h) {
            const int g = h / (NH / NKV);
            for (int t = 0; t < T; ++t) {
                const Vec q = head(b, t, h * hs);
                Vec s(std::size_t(t) + 1);
                double mx = -1e300, sum = 0;
                for (int u = 0; u <= t; ++u) {
                    const Vec k = head(b, u, C + g * hs);
                    double d = 0;
                    for (int i = 0; i < hs; ++i) d += q[std::size_t(i)] * k[std::size_t(i)];
                    s[std::size_t(u)] = d / std::sqrt(double(hs));
                    mx = std::max(mx, s[std::size_t(u)]);
                }
                for (auto& v : s) sum += (v = std::exp(v - mx));
                for (int u = 0; u <= t; ++u) {
                    const double* v = at(b, u, C + NKV * hs + g * hs);
                    for (int i = 0; i < hs; ++i)
                        out[(std::size_t(b) * T + t) * C + h * hs + i] += s[std::size_t(u)] / sum * v[i];
                }
            }
        }
    return out;
}

inline Vec gelu(const Vec& x) {
    Vec out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
        out[i] = 0.5 * x[i] * (1 + std::tanh(std::sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
    return out;
}

inline Vec swiglu(const Vec& x, std::size_t N, std::size_t H) {
    Vec out(N * H);
    for (std::size_t n = 0; n < N; ++n)
        for (std::size_t j = 0; j < H; ++j) {
            double g = x[n * 2 * H + j], u = x[n * 2 * H + H + j];
            out[n * H + j] = g / (1 + std::exp(-g)) * u;
        }
    return out;
}

// y (N,M) = x (N,K) w^T (M,K) + b
inline Vec linear(const Vec& x, const Vec& w, const Vec& b, std::size_t N, std::size_t K, std::size_t M) {
    Vec out(N * M);
    for (std::size_t n = 0; n < N; ++n)
        for (std::size_t m = 0; m < M; ++m) {
            double s = b.empty() ? 0.0 : b[m];
            for (std::size_t k = 0; k < K; ++k) s += x[n * K + k] * w[m * K + k];
            out[n * M + m] = s;
        }
    return out;
}

inline double cross_entropy(const Vec& logits, const std::vector<std::int32_t>& targets, std::size_t N, std::size_t V) {
    double total = 0;
    for (std::size_t n = 0; n < N; ++n) {
        double mx = -1e300, sum = 0;
        for (std::size_t v = 0; v < V; ++v) mx = std::max(mx, logits[n * V + v]);
        for (std::size_t v = 0; v < V; ++v) sum += std::exp(logits[n * V + v] - mx);
        total += std::log(sum) + mx - logits[n * V + std::size_t(targets[n])];
    }
    return total / double(N);
}

// The whole model's mean loss, reading the parameters by name from `params` laid out as
// model.param_tensors() says.
inline double model_loss(const Model& model, const Vec& params, const std::vector<std::int32_t>& tok,
                         const std::vector<std::int32_t>& tgt, int B, int T) {
    const ModelConfig& c = model.config();
    auto get = [&](const std::string& name) {
        for (const auto& t : model.param_tensors())
            if (t.name == name)
                return Vec(params.begin() + std::ptrdiff_t(t.offset), params.begin() + std::ptrdiff_t(t.offset + t.numel()));
        return Vec{};
    };
    const std::size_t N = std::size_t(B) * T, C = std::size_t(c.d_model), H = std::size_t(c.hidden());
    const bool rms = c.norm == NormKind::RMSNorm, swi = c.mlp == MlpKind::SwiGLU;
    Vec x = embedding(tok, get("wte"), get("wpe"), B, T, int(C));
    for (int l = 0; l < c.n_layer; ++l) {
        std::string p = "blocks." + std::to_string(l) + ".";
        Vec h = norm(x, get(p + "ln1.weight"), get(p + "ln1.bias"), N, C, rms);
        const int KV = c.n_kv_head > 0 ? c.n_kv_head : c.n_head;
        const std::size_t W = C + 2 * std::size_t(KV) * (C / std::size_t(c.n_head));
        Vec qkv = linear(h, get(p + "attn.qkv.weight"), get(p + "attn.qkv.bias"), N, C, W);
        Vec att = attention(qkv, B, T, int(C), c.n_head, KV, c.pos == PosKind::Rope ? double(c.rope_theta) : 0.0);
        Vec proj = linear(att, get(p + "attn.proj.weight"), get(p + "attn.proj.bias"), N, C, C);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
        h = norm(x, get(p + "ln2.weight"), get(p + "ln2.bias"), N, C, rms);
        Vec f = linear(h, get(p + "mlp.fc1.weight"), get(p + "mlp.fc1.bias"), N, C, swi ? 2 * H : H);
        Vec a = swi ? swiglu(f, N, H) : gelu(f);
        Vec out = linear(a, get(p + "mlp.fc2.weight"), get(p + "mlp.fc2.bias"), N, H, C);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += out[i];
    }
    Vec h = norm(x, get("ln_f.weight"), get("ln_f.bias"), N, C, rms);
    const Vec head = c.tie_embeddings ? get("wte") : get("head.weight");  // GPT-2 ties them
    Vec logits = linear(h, head, {}, N, C, std::size_t(c.vocab_size));
    return cross_entropy(logits, tgt, N, std::size_t(c.vocab_size));
}

// Central differences of f at x, step h (float64 throughout).
inline Vec numeric_grad(const std::function<double(const Vec&)>& f, Vec x, double h = 1e-6) {
    Vec g(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        double keep = x[i];
        x[i] = keep + h;
        double fp = f(x);
        x[i] = keep - h;
        double fm = f(x);
        x[i] = keep;
        g[i] = (fp - fm) / (2 * h);
    }
    return g;
}

}  // namespace fp8scope::ref
