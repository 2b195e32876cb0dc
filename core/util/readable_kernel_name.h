// A GPU kernel's name folded for reading on a timeline or in a table; the full name stays
// beside it (tooltips, exports). Library GEMM kernels encode their types and tile in
// codes; C++ kernels carry namespaces and template arguments:
//   "nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_Ablk128_Bvec128_bias_TNN"
//       -> "cuBLASLt GEMM e4m3 x e4m3 -> bf16 128x128x128 block scales +bias"
//   "sm90_xmma_gemm_e4m3e4m3_bf16_f32_tn_n_tilesize128x128x128_..."
//       -> "cuBLASLt GEMM e4m3 x e4m3 -> bf16 128x128x128"
//   "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnn_..."
//       -> "CUTLASS GEMM e4m3 x e4m3 -> bf16 128x128x128"
//   "fp8scope::cuda::qk::cast_block_kernel<float, (fp8scope::Format)0, (fp8scope::cuda::qk::BlockShape)2>"
//       -> "cast_block<f32, e4m3, 128x128>"
// nvjet codes: after the architecture, one letter per type (A and B, or A, B and C when
// they differ; then compute, then D): h f16, s f32, t bf16, d f64, q e4m3, r e5m2, i int8;
// then the tile MxN, K and stages. C++ names lose namespaces and a "_kernel" suffix; of
// the template arguments, fp8scope's enums are named, element types abbreviated (our
// kernels hold bf16 as unsigned short), functors lose an "Op" suffix and nested
// templates their arguments. A name cut short by the trace's column keeps only what is
// complete. Names of no known form come back unchanged.
#pragma once

#include <string>
#include <string_view>

namespace fp8scope {

std::string readable_kernel_name(std::string_view full);

}  // namespace fp8scope
