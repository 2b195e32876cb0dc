// Chooses the tensor file reader by the file's extension.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "io/tensor_file.h"

namespace fp8scope {

std::vector<LoadedTensor> read_tensor_file(const std::string& path) {
    std::string ext = std::filesystem::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (ext == ".npy") {
        std::vector<LoadedTensor> out;
        out.push_back(read_npy(path));
        return out;
    }
    if (ext == ".safetensors") return read_safetensors(path);
    std::string shown = ext.empty() ? "no extension" : "extension '" + ext + "'";
    throw TensorFileError(path, "unsupported file type (" + shown + "); supported: .npy, .safetensors");
}

}  // namespace fp8scope
