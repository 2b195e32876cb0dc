// Reading tensors from files other tools write: NumPy .npy and .safetensors.
// Every error is a TensorFileError whose message names the file and the problem; a
// file that fails never yields partial tensors.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor.h"

namespace fp8scope {

class TensorFileError : public std::runtime_error {
public:
    TensorFileError(const std::string& path, const std::string& problem)
        : std::runtime_error(path + ": " + problem), path_(path), problem_(problem) {}
    const std::string& path() const { return path_; }
    const std::string& problem() const { return problem_; }

private:
    std::string path_, problem_;
};

// A loaded tensor and what it was stored as ("float16", "bfloat16", ...).
struct LoadedTensor {
    Tensor tensor;  // name: the safetensors key, or the file's stem for .npy
    std::string source_dtype;
};

// .npy (versions 1.0-3.0): float16, float32, float64 (little or big endian), C or
// Fortran order; a 0-d array loads with shape {}. float64 beyond float32 range -> +-Inf.
LoadedTensor read_npy(const std::string& path);
// .safetensors: every tensor of dtype F32, F16, BF16 or F64, in order of data offset.
// Tensors of other dtypes are an error naming the tensor and dtype.
std::vector<LoadedTensor> read_safetensors(const std::string& path);
// A .safetensors tensor as its header describes it, without its data.
struct TensorInfo {
    std::string name, source_dtype;
    std::vector<std::int64_t> shape;
};
// The header alone, checked as read_safetensors checks it, in the same order.
std::vector<TensorInfo> list_safetensors(const std::string& path);
// Chooses by extension (.npy, .safetensors); anything else is an error.
std::vector<LoadedTensor> read_tensor_file(const std::string& path);

// .npy writers for dumps (C order, little endian, format version 1.0).
void write_npy(const std::string& path, const std::vector<std::int64_t>& shape, const float* data);
void write_npy(const std::string& path, const std::vector<std::int64_t>& shape, const std::uint8_t* data);

}  // namespace fp8scope
