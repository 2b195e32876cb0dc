// A capture folder written by the PyTorch hook (python/fp8scope_torch): manifest.json
// (format "fp8scope-torch-capture", version 1) and one .safetensors file per linear and
// capture step. The manifest names every tensor: its step, linear, operand (x, w or dy,
// each read by two GEMMs, core/operands.h), file, dtype and shape as stored, x (N,K),
// w (M,K), dy (N,M); and every step's loss and time the run reported.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "operands.h"
#include "tensor.h"

namespace fp8scope::import {

inline constexpr const char* kTorchCaptureFormat = "fp8scope-torch-capture";
inline constexpr int kTorchCaptureVersion = 1;
inline constexpr const char* kManifestName = "manifest.json";

// A capture folder that cannot be read: the message names the file, and the field
// (`tensors[3].shape`) or tensor, and the problem.
class CaptureError : public std::runtime_error {
public:
    CaptureError(const std::string& path, const std::string& problem)
        : std::runtime_error(path + ": " + problem), path_(path) {}
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

struct CapturedTensor {
    std::int64_t step = 0;
    int linear = 0;  // index into TorchCapture::linears
    Operand operand = Operand::X;
    std::string name;  // its key in `file`
    std::string file;  // relative to the folder
    std::string dtype;  // BF16, F16, F32 or F64
    std::int64_t rows = 0, cols = 0;
    std::string field;  // "tensors[3]", for messages
};

struct CapturedStep {
    std::int64_t step = 0;
    double loss;     // NaN when not reported
    double step_ms;  // NaN when not reported
    bool captured = false;
};

struct TorchCapture {
    std::string dir;
    std::string manifest;  // its path
    std::string name;      // the run's name
    std::string torch_version, created;
    std::int64_t every = 1;
    int rank = 0, world_size = 1;  // the process of a data-parallel job that captured
    std::vector<LinearInfo> linears;
    std::vector<CapturedStep> steps;      // in the order reported
    std::vector<CapturedTensor> tensors;  // in the order written
    std::int64_t bytes = 0;               // tensor bytes written
    std::optional<std::int64_t> stopped_step;  // capture stopped before or at this step
    std::string stopped_reason;
    std::string error;      // why the writer stopped ("" none)
    bool complete = false;  // the run closed the capture
    std::string manifest_json;  // the whole manifest, as read
};

// Reads and checks `dir`/manifest.json: every field's type and range, every tensor's
// linear and operand, shapes that agree with the linear's features and, within a step,
// x and dy with the same rows. Throws CaptureError naming the file and field.
TorchCapture read_torch_capture(const std::string& dir);

// The tensor's values (float32, row-major rows x cols) from its file, checked against the
// manifest (present, dtype, shape). Throws CaptureError naming the file and tensor.
Tensor load_captured(const TorchCapture& capture, const CapturedTensor& t);

// The loaded values of several tensors that share one file, read once; same checks.
std::vector<Tensor> load_captured(const TorchCapture& capture, const std::vector<const CapturedTensor*>& tensors);

}  // namespace fp8scope::import
