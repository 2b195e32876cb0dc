// `fp8scope-engine train --init-from` as a user runs it: the model the checkpoint gives
// (--print-config), what the run says about the weights and config.json, a resume that no
// longer needs the checkpoint, and exit status 2 with the tensor named for a broken one.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/run_engine.h"
#include "support/hf_checkpoint.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace fp8scope::testing;

namespace {

fs::path scratch() { return scratch_dir("fp8scope_init_from_cli"); }

EngineResult train(const std::string& args) { return run_engine("train --threads 2 " + args, scratch()); }

// A GPT-2 folder: model.safetensors and a config.json with 4 heads and GPT-2's own epsilon.
fs::path gpt2_folder(const std::string& name, const Tensors& tensors) {
    const fs::path dir = scratch() / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    write_safetensors(dir / "model.safetensors", tensors);
    write_text(dir / "config.json", R"({"model_type": "gpt2", "n_head": 4, "layer_norm_epsilon": 1e-06})");
    return dir;
}

}  // namespace

TEST(InitFromCli, TheModelIsTheCheckpointsAndTheRunSaysSo) {
    const fs::path dir = gpt2_folder("gpt2", gpt2_tensors("transformer.", false, true));
    const EngineResult config = train("--init-from " + dir.string() + " --seq 16 --print-config");
    ASSERT_EQ(config.status, 0) << config.err;
    const json c = json::parse(config.out);
    EXPECT_EQ(c["init_from"], dir.string());
    EXPECT_EQ(c["model"]["vocab_size"], kV);
    EXPECT_EQ(c["model"]["max_seq"], kT);
    EXPECT_EQ(c["model"]["n_layer"], kL);
    EXPECT_EQ(c["model"]["d_model"], kC);
    EXPECT_EQ(c["model"]["n_head"], 4);
    EXPECT_EQ(c["model"]["tie_embeddings"], true);

    const fs::path ckpt = scratch() / "ckpt";
    const EngineResult run = train("--init-from " + dir.string() +
                                   " --seq 16 --batch 2 --steps 2 --json --checkpoint-dir " + ckpt.string());
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_NE(run.err.find("weights from " + dir.string() + ": 2 layers, d_model 8, 4 heads, d_ff 32, vocab 260, "
                                                            "max_seq 16, tied head"),
              std::string::npos)
        << run.err;
    EXPECT_NE(run.err.find("note: " + (dir / "config.json").string() +
                           ": layer_norm_epsilon 1e-06; the engine's norms use 1e-5"),
              std::string::npos)
        << run.err;

    // The checkpoint holds the weights now: resuming does not read the pretrained ones.
    fs::remove_all(dir);
    const EngineResult resumed = train("--resume " + (ckpt / "step_2.ckpt").string() + " --steps 3 --quiet");
    EXPECT_EQ(resumed.status, 0) << resumed.err;
}

TEST(InitFromCli, BrokenCheckpointsAndUnfitTokensAreNamed) {
    Tensors ts = gpt2_tensors("", false, false);
    for (StTensor& t : ts)
        if (t.name == "h.1.mlp.c_fc.weight") t.shape = {4 * kC, kC};
    const fs::path dir = gpt2_folder("misshapen", ts);
    const EngineResult bad = train("--init-from " + dir.string() + " --seq 16");
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.err.find("error: " + dir.string() + ": GPT-2 checkpoint: tensor 'h.1.mlp.c_fc.weight' has shape "
                                                      "[32, 8], expected [8, 32]"),
              std::string::npos)
        << bad.err;

    const fs::path missing = scratch() / "nowhere.safetensors";
    const EngineResult none = train("--init-from " + missing.string() + " --seq 16");
    EXPECT_EQ(none.status, 2);
    EXPECT_NE(none.err.find(missing.string() + ": "), std::string::npos) << none.err;

    // A token past the checkpoint's vocabulary of 260.
    const fs::path good = gpt2_folder("good", gpt2_tensors("", false, false));
    std::vector<std::int32_t> header(256, 0);
    std::vector<std::uint16_t> tokens(300, 1);
    tokens[17] = 300;
    header[0] = 20240520;
    header[1] = 1;
    header[2] = std::int32_t(tokens.size());
    const fs::path bin = scratch() / "tokens.bin";
    {
        std::ofstream out(bin, std::ios::binary);
        out.write(reinterpret_cast<const char*>(header.data()), 1024);
        out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
    }
    const EngineResult unfit = train("--init-from " + good.string() + " --seq 16 --batch 2 --steps 1 --data tokens:" +
                                     bin.string());
    EXPECT_EQ(unfit.status, 1);
    EXPECT_NE(unfit.err.find(bin.string() + ": token 300 at position 17 is outside the vocabulary"), std::string::npos)
        << unfit.err;
}
