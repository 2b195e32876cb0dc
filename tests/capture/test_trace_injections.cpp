// A config's outlier injections in a trace's metadata: a row per index, written and read
// back row for row; a trace of a config without injections has none.
#include <gtest/gtest.h>

#include "engine/model_impl.h"

#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"
#include "train_recorder.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

TEST(TraceInjections, EveryIndexOfEveryEntryComesBack) {
    TrainConfig c;
    c.model.n_layer = 2;
    c.compare = {"baseline", "delayed"};
    c.inject = {{20, 40, 1, "mlp.fc2", Operand::X, false, {17, 5}, 300.0f},
                {3, std::nullopt, std::nullopt, "attn.*", Operand::DY, true, {0}, 0.25f}};
    const TraceMeta m = make_trace_meta(c, model_linears(c.model), "test", 0);
    ASSERT_EQ(m.injections.size(), 3u);
    TempDir dir;
    const std::string path = dir.file("inject.h5");
    {
        TraceWriter w(path, m);
        w.close();
    }
    TraceReader r(path);
    const auto& got = r.meta().injections;
    ASSERT_EQ(got.size(), 3u);
    for (std::size_t i = 0; i < got.size(); ++i) expect_same(got[i], m.injections[i]);
    EXPECT_EQ(got[0].entry, 0);
    EXPECT_EQ(got[0].step, 20);
    EXPECT_EQ(got[0].until, 40);
    EXPECT_EQ(got[0].layer, 1);
    EXPECT_EQ(got[0].linear, "mlp.fc2");
    EXPECT_EQ(got[0].operand, Operand::X);
    EXPECT_EQ(got[0].rows, 0);
    EXPECT_EQ(got[0].index, 17);
    EXPECT_EQ(got[0].scale, 300.0);
    EXPECT_EQ(got[1].index, 5);
    EXPECT_EQ(got[2].entry, 1);
    EXPECT_EQ(got[2].until, -1);  // to the end
    EXPECT_EQ(got[2].layer, -1);  // every block
    EXPECT_EQ(got[2].operand, Operand::DY);
    EXPECT_EQ(got[2].rows, 1);
    EXPECT_EQ(got[2].scale, 0.25);

    TrainConfig plain = c;
    plain.inject.clear();
    EXPECT_TRUE(make_trace_meta(plain, model_linears(plain.model), "test", 0).injections.empty());
}

}  // namespace
}  // namespace fp8scope::trace
