// `analyze --dump DIR`: the FP8 (or FP4) codes and scales of every tensor under every recipe as
// .npy files other tools can load:
//   DIR/<tensor>.<recipe>.codes.npy       uint8, rows x cols of the 2-D view
//   DIR/<tensor>.<recipe>.scale_inv.npy   float32, the scale grid
//   DIR/<tensor>.<recipe>.scale_e8m0.npy  uint8, MX recipes only
// and for the FP4 quantizers (E2M1 codes: sign in bit 3, magnitude index in bits 0-2):
//   DIR/<tensor>.<quantizer>.codes.npy             uint8, rows x cols, one code per element
//   DIR/<tensor>.<quantizer>.scale_e4m3.npy        uint8, NVFP4: E4M3 codes of the block scales
//   DIR/<tensor>.<quantizer>.tensor_scale_inv.npy  float32 (1,), NVFP4: S_dec
//   DIR/<tensor>.<quantizer>.scale_e8m0.npy        uint8, MXFP4: e + 127 per block
// Tensor and recipe names are made filesystem-safe (characters outside [A-Za-z0-9._+-]
// become '_'); a tensor whose safe name is taken gets a suffix _2, _3, ...
#pragma once

#include <set>
#include <string>
#include <vector>

#include "fp8/recipe.h"
#include "tensor.h"

namespace fp8scope::cli {

std::string safe_file_name(const std::string& name);

class Dumper {
public:
    // Creates `dir` when missing; throws std::runtime_error naming it when it cannot.
    explicit Dumper(std::string dir);
    // Throws std::runtime_error (or TensorFileError) naming the file that failed.
    void dump(const Tensor& t, const std::vector<Recipe>& recipes, int threads);

private:
    std::string unique_stem(const std::string& tensor_name);

    std::string dir_;
    std::set<std::string> used_;
};

}  // namespace fp8scope::cli
