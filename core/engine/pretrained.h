// Starting a run from a Hugging Face checkpoint (train --init-from): the GPT-2 and Llama
// families' safetensors layouts, in one file, a folder with model.safetensors or a folder
// of shards with model.safetensors.index.json. The model's shape comes from the
// checkpoint's tensors, the head count (and Llama's KV heads, RoPE base) from a
// config.json beside it when there is one. Every checkpoint tensor is accounted for by
// name: a missing, unknown or misshapen one is an error naming it and both shapes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/model_config.h"

namespace fp8scope {

enum class PretrainedFamily { GPT2, Llama };
const char* pretrained_family_name(PretrainedFamily f);  // "GPT-2", "Llama"

// A checkpoint's tensors as its headers list them: name -> file (a shard) and shape.
struct CheckpointTensor {
    std::string file;
    std::vector<std::int64_t> shape;
};
struct CheckpointFiles {
    std::string path;         // as given
    std::string config_json;  // config.json beside the weights; empty when there is none
    std::map<std::string, CheckpointTensor> tensors;
};
// Reads the headers only. Throws TensorFileError or std::invalid_argument naming the file.
CheckpointFiles open_checkpoint(const std::string& path);

// The model a checkpoint holds.
struct PretrainedArch {
    PretrainedFamily family = PretrainedFamily::GPT2;
    std::string prefix;       // GPT-2's optional "transformer."
    int vocab_size = 0, n_layer = 0, d_model = 0, d_ff = 0;
    int max_seq = 0;          // GPT-2: position embedding rows; Llama: max_position_embeddings (0: not given)
    int n_head = 0, n_kv_head = 0;
    bool tie_embeddings = false;
    double rope_theta = 0;    // Llama (config.json; 0: not given)
    std::vector<std::string> notes;  // what the engine does differently from config.json (eps, activation)
};
// `fallback_n_head`: the head count when no config.json gives it (the user's config's).
PretrainedArch inspect_pretrained(const CheckpointFiles& files, int fallback_n_head);

// The engine model for the checkpoint: `user`'s with the checkpoint's shape, kinds and
// head count. Throws std::invalid_argument when the engine cannot run that model.
ModelConfig pretrained_model_config(const PretrainedArch& arch, const ModelConfig& user, const std::string& path);

// How an engine parameter is made from checkpoint tensors: its parts stacked by rows,
// GPT-2's Conv1D weights transposed.
struct TensorSource {
    struct Part {
        std::string name;                  // checkpoint tensor
        std::vector<std::int64_t> shape;   // as stored
        bool transpose = false;            // stored (in, out), the engine's (out, in)
    };
    std::string engine;                    // "blocks.0.attn.qkv.weight"
    std::vector<std::int64_t> shape;       // the engine's
    std::vector<Part> parts;
};
std::vector<TensorSource> pretrained_map(const PretrainedArch& arch);

// The parameters in the layout of `table` (Model::param_tensors()), every value from the
// checkpoint converted to float32. The table and the map must name the same tensors.
std::vector<float> load_pretrained(const CheckpointFiles& files, const PretrainedArch& arch,
                                   const std::vector<ParamTensor>& table);

}  // namespace fp8scope
