// The runs' precision plans in a trace: what the engine's metadata records for a config
// with a custom recipe, written and read back row for row; a trace without the table
// (written before it was recorded) reads with none.
#include <gtest/gtest.h>
#include <hdf5.h>

#include "engine/model_impl.h"

#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"
#include "train_recorder.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

TrainConfig custom_config() {
    TrainConfig c;
    c.model.n_layer = 2;
    c.recipes = {{"current_bf16_last", "current",
                  {{{"blocks.1.*"}, {}, "baseline"}, {{"blocks.0.mlp.fc2"}, {Gemm::Wgrad}, "mxfp8"}}}};
    c.compare = {"baseline", "current_bf16_last"};
    return c;
}

TEST(TracePrecision, TheResolvedPlanOfEveryRunComesBack) {
    const TrainConfig c = custom_config();
    const TraceMeta m = make_trace_meta(c, model_linears(c.model), "test", 0);
    ASSERT_EQ(m.precision.size(), 2u * 8u * 3u);  // runs x linears x GEMMs
    EXPECT_EQ(m.training_recipes.back(), "current_bf16_last");
    TempDir dir;
    const std::string path = dir.file("plan.h5");
    {
        TraceWriter w(path, m);
        w.close();
    }
    TraceReader r(path);
    const auto& got = r.meta().precision;
    ASSERT_EQ(got.size(), m.precision.size());
    for (std::size_t i = 0; i < got.size(); ++i) expect_same(got[i], m.precision[i]);

    const std::string e4m3 = recipe_name(*training_recipe("current").x);
    const std::string e5m2 = recipe_name(*training_recipe("current").dy);
    const std::string mx = recipe_name(*training_recipe("mxfp8").x);
    const std::vector<GemmPrecision> base = run_precision(r.meta(), 0), plan = run_precision(r.meta(), 1);
    ASSERT_EQ(plan.size(), 24u);
    for (const GemmPrecision& p : base) {
        EXPECT_EQ(p.recipe, "baseline");
        EXPECT_EQ(p.a + p.b, "");
        EXPECT_EQ(p.overridden, 0);
    }
    auto at = [&](int linear, Gemm g) { return plan[std::size_t(linear) * 3 + std::size_t(g)]; };
    // blocks.0.attn.qkv: the base recipe in every GEMM.
    EXPECT_EQ(at(0, Gemm::Fprop).recipe, "current");
    EXPECT_EQ(at(0, Gemm::Fprop).a, e4m3);
    EXPECT_EQ(at(0, Gemm::Fprop).b, e4m3);
    EXPECT_EQ(at(0, Gemm::Dgrad).a, e5m2);  // dy
    EXPECT_EQ(at(0, Gemm::Dgrad).b, e4m3);  // w
    EXPECT_EQ(at(0, Gemm::Wgrad).overridden, 0);
    // blocks.0.mlp.fc2: wgrad alone under mxfp8.
    EXPECT_EQ(at(3, Gemm::Fprop).recipe, "current");
    EXPECT_EQ(at(3, Gemm::Wgrad).recipe, "mxfp8");
    EXPECT_EQ(at(3, Gemm::Wgrad).a, mx);
    EXPECT_EQ(at(3, Gemm::Wgrad).overridden, 1);
    // blocks.1.*: high precision.
    for (int l = 4; l < 8; ++l)
        for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad}) {
            EXPECT_EQ(at(l, g).recipe, "baseline");
            EXPECT_EQ(at(l, g).a + at(l, g).b, "");
            EXPECT_EQ(at(l, g).overridden, 1);
        }
}

TEST(TracePrecision, ATraceWithoutTheTableHasNoPlan) {
    TempDir dir;
    const std::string path = dir.file("old.h5");
    {
        TraceWriter w(path, sample_meta());
        w.close();
    }
    {  // as a writer from before the plans wrote it
        const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        ASSERT_GE(f, 0);
        ASSERT_GE(H5Ldelete(f, "/meta/precision", H5P_DEFAULT), 0);
        H5Fclose(f);
    }
    TraceReader r(path);
    EXPECT_EQ(r.meta().runs.size(), 2u);
    EXPECT_TRUE(r.meta().precision.empty());
    EXPECT_TRUE(run_precision(r.meta(), 0).empty());
}

}  // namespace
}  // namespace fp8scope::trace
