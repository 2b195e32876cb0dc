// The units of capture: a model's linear layers, the three GEMMs each one runs and the
// two operands of each GEMM. Shared by the engine, the trace and the GUI.
//   fprop  Y  = X W^T   X (N,K), W (M,K)
//   dgrad  dX = dY W    dY (N,M), W^T (K,M)
//   wgrad  dW = dY^T X  dY^T (M,N), X^T (K,N)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fp8scope {

enum class Gemm : std::uint8_t { Fprop, Dgrad, Wgrad };
enum class Operand : std::uint8_t { X, W, DY };  // activation, weight, output gradient

std::string_view gemm_name(Gemm g);        // "fprop", "dgrad", "wgrad"
std::string_view operand_name(Operand o);  // "x", "w", "dy"

// A linear layer whose GEMMs are quantized.
struct LinearInfo {
    std::string name;                // "blocks.0.attn.qkv", "blocks.0.mlp.fc1", ...
    int layer = 0;                   // transformer block
    std::int64_t in_features = 0, out_features = 0;
};

}  // namespace fp8scope
