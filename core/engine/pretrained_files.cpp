// Where a pretrained checkpoint's tensors are: one .safetensors file, a folder with
// model.safetensors, or a folder of shards listed by model.safetensors.index.json
// ({"weight_map": {"tensor name": "shard file", ...}}). Only headers are read here; the
// index and the shards' headers must agree tensor by tensor.
#include <cctype>
#include <filesystem>
#include <stdexcept>

#include "engine/pretrained.h"
#include "io/input_file.h"
#include "io/tensor_file.h"
#include "util/json_input.h"

namespace fp8scope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool ends_with(const std::string& s, std::string_view tail) {
    if (s.size() < tail.size()) return false;
    for (std::size_t i = 0; i < tail.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(s[s.size() - tail.size() + i])) != tail[i]) return false;
    return true;
}

void add_file(CheckpointFiles& c, const std::string& file) {
    for (TensorInfo& t : list_safetensors(file)) {
        auto [it, fresh] = c.tensors.emplace(t.name, CheckpointTensor{file, t.shape});
        if (!fresh)
            throw std::invalid_argument(c.path + ": tensor '" + clip(t.name) + "' is in both " + it->second.file +
                                        " and " + file);
    }
}

// The shards of an index, each header checked against the index's weight_map.
void add_index(CheckpointFiles& c, const std::string& index) {
    constexpr std::uint64_t kMaxIndexBytes = 64u << 20;
    json j;
    try {
        j = parse_json(read_regular_file(index, "shard index", kMaxIndexBytes));
    } catch (const JsonInputError& e) {
        throw std::invalid_argument(index + ": invalid JSON: " + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        throw std::invalid_argument(index + ": expected an object with a 'weight_map' of tensor names to shard files");
    const fs::path dir = fs::path(index).parent_path();
    std::map<std::string, std::string> wanted;  // tensor -> shard path
    std::map<std::string, int> shards;          // shard path -> its tensors in the map
    for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string() || file.get<std::string>().empty())
            throw std::invalid_argument(index + ": weight_map entry '" + clip(name) + "' must name a shard file, got " +
                                        show_json(file));
        const std::string shard = (dir / file.get<std::string>()).string();
        wanted[name] = shard;
        ++shards[shard];
    }
    if (wanted.empty()) throw std::invalid_argument(index + ": the weight_map lists no tensors");
    for (const auto& [shard, count] : shards) add_file(c, shard);
    for (const auto& [name, t] : c.tensors) {
        auto it = wanted.find(name);
        if (it == wanted.end())
            throw std::invalid_argument(index + ": " + t.file + " holds tensor '" + clip(name) +
                                        "', which the weight_map does not list");
        if (it->second != t.file)
            throw std::invalid_argument(index + ": the weight_map puts tensor '" + clip(name) + "' in " + it->second +
                                        ", but it is in " + t.file);
    }
    for (const auto& [name, shard] : wanted)
        if (!c.tensors.count(name))
            throw std::invalid_argument(index + ": the weight_map puts tensor '" + clip(name) + "' in " + shard +
                                        ", which does not hold it");
}

}  // namespace

CheckpointFiles open_checkpoint(const std::string& path) {
    CheckpointFiles c;
    c.path = path;
    std::error_code ec;
    fs::path dir;
    if (fs::is_directory(path, ec)) {
        dir = path;
        const fs::path index = dir / "model.safetensors.index.json", single = dir / "model.safetensors";
        if (fs::exists(index, ec)) add_index(c, index.string());
        else if (fs::exists(single, ec)) add_file(c, single.string());
        else
            throw std::invalid_argument(path + ": the folder has neither model.safetensors nor "
                                               "model.safetensors.index.json (a sharded checkpoint)");
    } else {
        dir = fs::path(path).parent_path();
        if (ends_with(path, ".index.json")) add_index(c, path);
        else if (ends_with(path, ".safetensors")) add_file(c, path);
        else
            throw std::invalid_argument(path + ": not a .safetensors file, a shard index (.index.json) or a folder "
                                               "holding one (PyTorch .bin checkpoints are not read)");
    }
    const fs::path config = (dir.empty() ? fs::path(".") : dir) / "config.json";
    if (fs::is_regular_file(config, ec)) c.config_json = config.string();
    return c;
}

}  // namespace fp8scope
