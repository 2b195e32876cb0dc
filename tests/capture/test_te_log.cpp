// Transformer Engine statistics logs: metric names, stat spellings of the TE versions, and
// the line layout, on lines written by hand from nvdlfw_inspect's format
// ("%(asctime)s - %(levelname)s - %(message)s" around
// "{name} \t\t\t\t iteration={:06d} \t\t\t\t value={:.4f}"). Bad and partial lines are
// named with their file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "te_log.h"
#include "trace_fixture.h"

namespace fp8scope::te_log {
namespace {

using trace::testing::TempDir;

std::string stats_line(const std::string& name, long long iteration, const std::string& value) {
    char it[32];
    std::snprintf(it, sizeof it, "%06lld", iteration);
    return "2025-06-10 12:00:01,123 - INFO - " + name + " \t\t\t\t iteration=" + it + " \t\t\t\t value=" + value + "\n";
}

Log parse(const std::string& text, std::vector<Issue>& errors, const std::string& path = "stats.log") {
    Log log;
    log.files.push_back({path, 0});
    std::istringstream in(text);
    parse_log(log, 0, in, errors);
    return log;
}

void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

TEST(TeLogStat, ParsesEverySpellingOfTheVersions) {
    struct Case {
        const char* name;
        StatKind kind;
        const char* recipe;
        bool columnwise;
    };
    const Case cases[] = {
        // nvdlfw_inspect's LogTensorStats and TE's additions
        {"min", StatKind::Min, "", false},
        {"max", StatKind::Max, "", false},
        {"mean", StatKind::Mean, "", false},
        {"std", StatKind::Std, "", false},
        {"l1_norm", StatKind::L1Norm, "", false},
        {"l2_norm", StatKind::L2Norm, "", false},
        {"cur_amax", StatKind::CurAmax, "", false},
        {"dynamic_range", StatKind::DynamicRange, "", false},
        {"max_blockwise_dynamic_range_block_size_32_dims_1", StatKind::BlockwiseDynamicRange, "", false},
        {"max_blockwise_dynamic_range_block_size_16_dims_2_max_over_orientations", StatKind::BlockwiseDynamicRange, "",
         false},
        // LogFp8TensorStats, TE 2.4-2.6: the bare name only
        {"underflows%", StatKind::Underflows, "", false},
        // TE >= 2.7: [recipe_]stat[_columnwise]
        {"overflows%", StatKind::Overflows, "", false},
        {"scale_inv_min", StatKind::ScaleInvMin, "", false},
        {"scale_inv_max", StatKind::ScaleInvMax, "", false},
        {"mse", StatKind::Mse, "", false},
        {"fp8_delayed_scaling_overflows%", StatKind::Overflows, "fp8_delayed_scaling", false},
        {"fp8_current_scaling_underflows%", StatKind::Underflows, "fp8_current_scaling", false},
        {"fp8_block_scaling_scale_inv_max_columnwise", StatKind::ScaleInvMax, "fp8_block_scaling", true},
        {"mxfp8_scale_inv_min_columnwise", StatKind::ScaleInvMin, "mxfp8", true},
        {"mxfp8_mse", StatKind::Mse, "mxfp8", false},
        {"underflows%_columnwise", StatKind::Underflows, "", true},
        // LogNvfp4TensorStats (TE >= 2.13)
        {"nvfp4_underflows%", StatKind::Underflows, "nvfp4", false},
        {"nvfp4_mse", StatKind::Mse, "nvfp4", false},
        // not TE's
        {"variance", StatKind::Unknown, "", false},
        {"mxfp8_l1_norm", StatKind::Unknown, "", false},
        {"delayed_scaling_underflows%", StatKind::Unknown, "", false},
        {"underflows", StatKind::Unknown, "", false},
    };
    for (const Case& c : cases) {
        const StatName s = parse_stat(c.name);
        EXPECT_EQ(s.kind, c.kind) << c.name;
        EXPECT_EQ(s.recipe, c.recipe) << c.name;
        EXPECT_EQ(s.columnwise, c.columnwise) << c.name;
    }
}

TEST(TeLogMetric, SplitsAtTheRightmostTensorName) {
    MetricName m = split_metric("transformer_layer.self_attention.layernorm_qkv_activation_max");
    EXPECT_EQ(m.layer, "transformer_layer.self_attention.layernorm_qkv");
    ASSERT_TRUE(m.tensor);
    EXPECT_EQ(*m.tensor, Tensor::Activation);
    EXPECT_EQ(m.stat, "max");

    // A layer name may hold a tensor name; a statistic never does.
    m = split_metric("model.gate_weight_proj.layers.2_gradient_mxfp8_scale_inv_min_columnwise");
    EXPECT_EQ(m.layer, "model.gate_weight_proj.layers.2");
    EXPECT_EQ(*m.tensor, Tensor::Gradient);
    EXPECT_EQ(m.stat, "mxfp8_scale_inv_min_columnwise");

    m = split_metric("decoder.0.mlp.fc2_wgrad_l2_norm");
    EXPECT_EQ(*m.tensor, Tensor::Wgrad);
    EXPECT_EQ(m.layer, "decoder.0.mlp.fc2");

    m = split_metric("percentage_greater_than_threshold");
    EXPECT_FALSE(m.tensor);
    EXPECT_EQ(m.layer, "");
    EXPECT_EQ(m.stat, "percentage_greater_than_threshold");
    EXPECT_FALSE(split_metric("_weight_mse").tensor);  // no layer before it
}

TEST(TeLogText, ReadsTheDocumentedLayouts) {
    // The file as nvdlfw_inspect writes it, and as TE's getting-started page prints it
    // (no date, spaces instead of tabs); blank lines are passed over.
    const std::string text =
        stats_line("decoder.1.mlp.fc1_activation_cur_amax", 2, "4.3188") +
        "INFO - transformer_layer.self_attention.layernorm_qkv_activation_min                 iteration=000002"
        "                  value=-4.3386\n"
        "\n" +
        stats_line("decoder.1.mlp.fc1_gradient_underflows%", 3, "12.5000") +
        stats_line("decoder.1.mlp.fc1_weight_mse", 3, "nan") +
        stats_line("decoder.1.mlp.fc1_weight_scale_inv_max", -1, "inf") +
        stats_line("decoder.1.mlp.fc1_weight_l1_norm", 4, "130799.6953") +
        "INFO - decoder.1.mlp.fc1_weight_max iteration=000005 value=1e-05\r\n";  // a copy with Windows line ends
    std::vector<Issue> errors;
    const Log log = parse(text, errors);
    EXPECT_TRUE(errors.empty());
    EXPECT_TRUE(log.warnings.empty());
    EXPECT_TRUE(log.notices.empty());
    ASSERT_EQ(log.values.size(), 7u);
    const long long lines[] = {1, 2, 4, 5, 6, 7, 8};
    const long long iterations[] = {2, 2, 3, 3, -1, 4, 5};
    EXPECT_EQ(log.values[6].value, 1e-5);
    for (std::size_t i = 0; i < 7; ++i) {
        EXPECT_EQ(log.values[i].line, lines[i]);
        EXPECT_EQ(log.values[i].iteration, iterations[i]);
    }
    EXPECT_EQ(log.values[0].value, 4.3188);
    EXPECT_EQ(log.values[1].value, -4.3386);
    EXPECT_EQ(log.values[2].value, 12.5);
    EXPECT_TRUE(std::isnan(log.values[3].value));
    EXPECT_EQ(log.values[4].value, INFINITY);
    EXPECT_EQ(log.values[5].value, 130799.6953);
    EXPECT_EQ(log.layers, (std::vector<std::string>{"decoder.1.mlp.fc1", "transformer_layer.self_attention.layernorm_qkv"}));
    EXPECT_EQ(log.stats[log.values[2].stat], "underflows%");
    EXPECT_EQ(log.values[2].tensor, std::int8_t(Tensor::Gradient));
}

TEST(TeLogText, NamesEveryMalformedLineWithItsNumber) {
    const std::string text = stats_line("l.0.fc1_activation_max", 1, "1.0000") +
                             "Traceback (most recent call last):\n" +             // 2: not a statistics line
                             stats_line("l.0.fc1_activation_max", 2, "abc") +    // 3: value
                             stats_line("l.0.fc1_activation_max", 2, "1.0x") +   // 4: value
                             "2025-06-10 12:00:01,123 - INFO - l.0.fc1_activation_max iteration=2.5 value=1.0\n"  // 5
                             "2025-06-10 12:00:01,123 - INFO - l.0.fc1_activation_max value=1.0 iteration=2\n"    // 6
                             "2025-06-10 12:00:01,123 - NOTALEVEL - l.0.fc1_activation_max iteration=2 value=1.0\n" +  // 7
                             stats_line("l.0.fc1_activation_max", 3, "3.0000");  // 8: fine
    std::vector<Issue> errors;
    const Log log = parse(text, errors, "logs/rank0.log");
    ASSERT_EQ(errors.size(), 6u);
    const long long bad[] = {2, 3, 4, 5, 6, 7};
    for (std::size_t i = 0; i < errors.size(); ++i) {
        EXPECT_EQ(errors[i].file, "logs/rank0.log");
        EXPECT_EQ(errors[i].line, bad[i]) << errors[i].str();
    }
    EXPECT_EQ(errors[1].str(), "logs/rank0.log:3: value 'abc' is not a number");
    EXPECT_EQ(errors[3].str(), "logs/rank0.log:5: iteration '2.5' is not an integer");
    EXPECT_NE(errors[0].problem.find("not a statistics line"), std::string::npos);
    EXPECT_EQ(log.values.size(), 2u);  // read_logs throws on them; parsing goes on to name all
}

TEST(TeLogText, SkipsAnIncompleteLastLineWithANotice) {
    std::string text = stats_line("l.0.fc1_activation_max", 1, "1.0000") + stats_line("l.0.fc1_activation_max", 2, "2.0000");
    text += "2025-06-10 12:00:01,123 - INFO - l.0.fc1_activation_max \t\t\t\t iteration=000003 \t\t\t\t value=4.31";
    std::vector<Issue> errors;
    const Log log = parse(text, errors);
    EXPECT_TRUE(errors.empty());
    ASSERT_EQ(log.values.size(), 2u);  // "4.31" could be the start of 4.3188: never read
    ASSERT_EQ(log.notices.size(), 1u);
    EXPECT_EQ(log.notices[0].line, 3);
    EXPECT_NE(log.notices[0].problem.find("incomplete last line"), std::string::npos);

    // Cut anywhere, even in the middle of the name: a notice, not an error.
    const Log cut = parse(stats_line("l.0.fc1_activation_max", 1, "1.0000") + "2025-06-10 12:0", errors);
    EXPECT_TRUE(errors.empty());
    EXPECT_EQ(cut.notices.size(), 1u);
}

TEST(TeLogText, KeepsUnknownStatisticsAndNamesThem) {
    const std::string text = stats_line("l.0.fc1_activation_max", 1, "1.0000") +
                             stats_line("l.0.fc1_activation_percentage_greater_than_threshold", 1, "0.2500") +
                             stats_line("my_custom_metric", 1, "7.0000");
    std::vector<Issue> errors;
    const Log log = parse(text, errors);
    EXPECT_TRUE(errors.empty());
    ASSERT_EQ(log.values.size(), 3u);
    ASSERT_EQ(log.warnings.size(), 2u);
    EXPECT_EQ(log.warnings[0].line, 2);
    EXPECT_NE(log.warnings[0].problem.find("unknown statistic 'percentage_greater_than_threshold'"), std::string::npos);
    EXPECT_EQ(log.warnings[1].line, 3);
    EXPECT_EQ(log.values[2].layer, -1);
    EXPECT_EQ(log.stats[log.values[2].stat], "my_custom_metric");
    EXPECT_EQ(log.values[1].value, 0.25);
}

TEST(TeLogFiles, FindsTheStatisticsLogsOfEveryRank) {
    TempDir dir;
    const std::string line = stats_line("l.0.fc1_activation_max", 1, "1.0000");
    write(dir / "log/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-1.log", line);
    write(dir / "log/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log", line);
    write(dir / "log/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_20250610_120000_globalrank-10.log", line);
    // The debug log beside it has the same file name: not statistics.
    write(dir / "log/nvdlfw_inspect_logs/nvdlfw_inspect_globalrank-0.log", "INFO - Reading config from ./config.yaml.\n");
    write(dir / "log/nvdlfw_inspect_statistics_logs/notes.txt", "");
    const auto files = find_logs({dir / "log"});
    ASSERT_EQ(files.size(), 3u);
    EXPECT_EQ(files[0].rank, 0);
    EXPECT_EQ(files[1].rank, 1);
    EXPECT_EQ(files[2].rank, 10);
    EXPECT_EQ(files[0].path, dir / "log/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log");

    // A file named on the command line is taken as it is.
    write(dir / "other.log", line);
    const auto one = find_logs({dir / "other.log"});
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].rank, -1);

    // Named twice: read once.
    EXPECT_EQ(find_logs({dir / "log", dir / "log/./nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-1.log"}).size(), 3u);

    EXPECT_THROW(find_logs({dir / "missing"}), std::runtime_error);
    try {
        find_logs({dir / "log/nvdlfw_inspect_logs/nvdlfw_inspect_globalrank-0.log"});
        FAIL() << "the debug log";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("a debug log of nvdlfw_inspect, not statistics"), std::string::npos) << e.what();
    }
    std::filesystem::create_directories(dir / "empty");
    try {
        find_logs({dir / "empty"});
        FAIL() << "an empty folder";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("no Transformer Engine statistics log"), std::string::npos) << e.what();
    }
}

TEST(TeLogFiles, ReadLogsThrowsWithEveryBadLine) {
    TempDir dir;
    write(dir / "a.log", stats_line("l.0.fc1_activation_max", 1, "1.0000") + "garbage\n");
    write(dir / "b.log", "x\n" + stats_line("l.0.fc1_activation_max", 1, "1.0000") + stats_line("l.0.fc1_activation_max", 2, "?"));
    try {
        read_logs(find_logs({dir / "a.log", dir / "b.log"}));
        FAIL() << "malformed lines";
    } catch (const LogError& e) {
        ASSERT_EQ(e.issues().size(), 3u);
        EXPECT_EQ(e.issues()[0].file, dir / "a.log");
        EXPECT_EQ(e.issues()[0].line, 2);
        EXPECT_EQ(e.issues()[1].file, dir / "b.log");
        EXPECT_EQ(e.issues()[1].line, 1);
        EXPECT_EQ(e.issues()[2].line, 3);
        EXPECT_NE(std::string(e.what()).find(dir / "b.log:3: value '?' is not a number"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace fp8scope::te_log
