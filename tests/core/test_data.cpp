// Data sources and batches: the builtin corpus is deterministic and says true things,
// token files are validated field by field, batches stay inside their split.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/data.h"
#include "engine/data_corpus.h"

using namespace fp8scope;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
    return fs::temp_directory_path() / ("fp8scope_data_" + std::to_string(::getpid()) + "_" + name);
}

// A token file as llm.c writes it, with header fields that can be made wrong.
fs::path write_token_file(const std::string& name, const std::vector<std::uint16_t>& tokens,
                          std::int32_t magic = kTokenFileMagic, std::int32_t version = 1,
                          std::int64_t count = -1) {
    std::vector<std::int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = static_cast<std::int32_t>(count < 0 ? static_cast<std::int64_t>(tokens.size()) : count);
    fs::path p = temp_file(name);
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), 1024);
    out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
    return p;
}

std::string load_error(const fs::path& p, int vocab) {
    try {
        load_token_file(p.string(), vocab);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(BuiltinCorpus, IsDeterministicSizedAndPrintable) {
    std::string a = builtin_corpus(100000, 5), b = builtin_corpus(100000, 5), c = builtin_corpus(100000, 6);
    EXPECT_EQ(a.size(), 100000u);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    for (char ch : a) EXPECT_TRUE(ch == '\n' || (ch >= 32 && ch < 127)) << int(ch);
    EXPECT_EQ(builtin_corpus(5000, 5), a.substr(0, 5000));  // a prefix: sizes do not reshuffle
}

TEST(BuiltinCorpus, EverySumIsCorrect) {
    // The arithmetic sentences are learnable only if they are true.
    const std::vector<std::string> numbers = {"zero", "one", "two", "three", "four", "five", "six",
                                              "seven", "eight", "nine", "ten", "eleven", "twelve",
                                              "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                                              "eighteen"};
    std::map<std::string, int> value;
    for (int i = 0; i < static_cast<int>(numbers.size()); ++i) value[numbers[i]] = i;
    std::string text = builtin_corpus(200000, 20240520);
    std::regex sum("([a-z]+) plus ([a-z]+) is ([a-z]+)\\.", std::regex::icase);
    int checked = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), sum); it != std::sregex_iterator(); ++it) {
        std::string a = (*it)[1], b = (*it)[2], s = (*it)[3];
        a[0] = static_cast<char>(std::tolower(a[0]));
        ASSERT_TRUE(value.count(a) && value.count(b) && value.count(s)) << it->str();
        EXPECT_EQ(value[a] + value[b], value[s]) << it->str();
        ++checked;
    }
    EXPECT_GT(checked, 500);
}

TEST(BuiltinCorpus, QuestionsAreAnsweredAboutTheSamePerson) {
    std::string text = builtin_corpus(200000, 1);
    std::regex qa("where is ([a-z]+)\\? ([a-z]+) is in the", std::regex::icase);
    int checked = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), qa); it != std::sregex_iterator(); ++it) {
        EXPECT_EQ((*it)[1].str(), (*it)[2].str());
        ++checked;
    }
    EXPECT_GT(checked, 300);
}

TEST(TokenFile, LoadsTokensOfAValidFile) {
    fs::path p = write_token_file("ok.bin", {0, 1, 50256, 7, 300});
    TokenData d = load_token_file(p.string(), 50304);
    EXPECT_EQ(d.tokens, (std::vector<std::int32_t>{0, 1, 50256, 7, 300}));
    EXPECT_EQ(d.origin, p.string());
    fs::remove(p);
}

TEST(TokenFile, HeaderErrorsNameTheFileAndTheValue) {
    fs::path magic = write_token_file("magic.bin", {1, 2}, 12345);
    EXPECT_NE(load_error(magic, 256).find(magic.string() + ": token file header has magic 12345, expected 20240520"),
              std::string::npos) << load_error(magic, 256);
    fs::path version = write_token_file("version.bin", {1, 2}, kTokenFileMagic, 2);
    EXPECT_NE(load_error(version, 256).find("version 2 is not supported"), std::string::npos);
    fs::path count = write_token_file("count.bin", {1, 2, 3}, kTokenFileMagic, 1, 5);
    EXPECT_NE(load_error(count, 256).find("header says 5 tokens but the file holds 6 bytes of tokens (3 tokens)"),
              std::string::npos) << load_error(count, 256);
    fs::path zero = write_token_file("zero.bin", {}, kTokenFileMagic, 1, 0);
    EXPECT_NE(load_error(zero, 256).find("header says 0 tokens"), std::string::npos);
    fs::path vocab = write_token_file("vocab.bin", {5, 255, 256, 9});
    EXPECT_NE(load_error(vocab, 256).find("token 256 at position 2 is outside the vocabulary (model.vocab_size 256)"),
              std::string::npos) << load_error(vocab, 256);
    fs::path shorter = temp_file("short.bin");
    std::ofstream(shorter, std::ios::binary) << "abc";
    EXPECT_NE(load_error(shorter, 256).find("3 bytes is shorter than its 1024-byte header"), std::string::npos);
    EXPECT_NE(load_error(temp_file("missing.bin"), 256).find("cannot open"), std::string::npos);
    for (auto& p : {magic, version, count, zero, vocab, shorter}) fs::remove(p);
}

TEST(DataSource, PicksTheLoaderFromThePrefixOrExtension) {
    fs::path text = temp_file("t.txt");
    std::ofstream(text, std::ios::binary) << "h\xc3\xa9";
    fs::path bin = write_token_file("t.bin", {4, 5});
    DataConfig c;
    c.source = text.string();
    EXPECT_EQ(load_data(c, 256).tokens, (std::vector<std::int32_t>{'h', 0xc3, 0xa9}));
    c.source = "text:" + bin.string();  // forced byte-level: the header's bytes come first
    EXPECT_EQ(load_data(c, 256).tokens.size(), 1028u);
    c.source = bin.string();
    EXPECT_EQ(load_data(c, 256).tokens, (std::vector<std::int32_t>{4, 5}));
    c.source = "tokens:" + bin.string();
    EXPECT_EQ(load_data(c, 256).tokens, (std::vector<std::int32_t>{4, 5}));
    c.source = "builtin";
    c.corpus_bytes = 4096;
    EXPECT_EQ(load_data(c, 256).tokens.size(), 4096u);
    fs::remove(text);
    fs::remove(bin);
}

TEST(Batches, WindowsStayInsideTheirSplitAndTargetsAreShiftedByOne) {
    // Token value = position, so every window shows where it was taken from.
    TokenData d{"ramp", {}};
    for (int i = 0; i < 1000; ++i) d.tokens.push_back(i);
    BatchSampler s(d, 0.2, 4, 16, 99);
    EXPECT_EQ(s.train_tokens(), 800);
    EXPECT_EQ(s.val_tokens(), 200);
    Batch b;
    std::set<std::int32_t> starts;
    for (std::uint64_t i = 0; i < 2000; ++i) {
        s.train_batch(i, b);
        ASSERT_EQ(b.tokens.size(), 64u);
        for (int r = 0; r < 4; ++r) {
            std::int32_t start = b.tokens[r * 16];
            starts.insert(start);
            for (int t = 0; t < 16; ++t) {
                EXPECT_EQ(b.tokens[r * 16 + t], start + t);
                EXPECT_EQ(b.targets[r * 16 + t], start + t + 1);
            }
            EXPECT_LE(start + 16, 799);  // the last target is still a training token
        }
    }
    EXPECT_GT(starts.size(), 780u);  // 8000 draws cover (nearly) all 784 possible starts
    EXPECT_EQ(*starts.begin(), 0);
    EXPECT_EQ(*starts.rbegin(), 783);
    for (int i = 0; i < 3; ++i) {
        s.eval_batch(i, 3, b);
        for (int r = 0; r < 4; ++r) {
            EXPECT_GE(b.tokens[r * 16], 800);
            EXPECT_LE(b.targets[r * 16 + 15], 999);
        }
    }
    s.eval_batch(0, 3, b);
    EXPECT_EQ(b.tokens[0], 800);
    s.eval_batch(2, 3, b);
    EXPECT_EQ(b.targets[3 * 16 + 15], 999);  // the evenly spread windows reach the end
}

TEST(Batches, AreAPureFunctionOfSeedAndIndex) {
    TokenData d{"builtin", {}};
    std::string text = builtin_corpus(20000, 3);
    d.tokens.assign(text.begin(), text.end());
    BatchSampler a(d, 0.1, 8, 32, 1), b(d, 0.1, 8, 32, 1), c(d, 0.1, 8, 32, 2);
    Batch x, y, z;
    a.train_batch(17, x);
    b.train_batch(3, y);
    b.train_batch(17, y);  // order of requests does not matter
    c.train_batch(17, z);
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_NE(x.tokens, z.tokens);
    a.train_batch(18, y);
    EXPECT_NE(x.tokens, y.tokens);
}

TEST(Batches, TooLittleDataIsAClearError) {
    TokenData d{"tiny.txt", std::vector<std::int32_t>(100, 1)};
    try {
        BatchSampler s(d, 0.1, 2, 32, 1);
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("tiny.txt: 100 tokens give 90 for training and 10 held out"),
                  std::string::npos) << e.what();
    }
}

// An elastic job's 8 rows a step over 3 ranks: 2, 3 and 3 rows, which laid end to end are
// the batch one process draws, training and held-out alike.
TEST(Batches, ShardsOfAnUnevenSplitMakeTheWholeBatch) {
    TokenData d{"builtin", {}};
    const std::string text = builtin_corpus(20000, 3);
    d.tokens.assign(text.begin(), text.end());
    BatchSampler whole(d, 0.1, 8, 16, 5);
    Batch one, part;
    whole.train_batch(11, one);
    std::vector<std::int32_t> tokens, targets, eval;
    for (int r = 0; r < 3; ++r) {
        BatchSampler s(d, 0.1, 8, 16, 5);
        s.set_shard(r, 3);
        EXPECT_EQ(s.rows(), r == 0 ? 2 : 3);
        EXPECT_EQ(shard_rows(8, 3, r), s.rows());
        s.train_batch(11, part);
        EXPECT_EQ(part.B, s.rows());
        tokens.insert(tokens.end(), part.tokens.begin(), part.tokens.end());
        targets.insert(targets.end(), part.targets.begin(), part.targets.end());
        s.eval_batch(1, 2, part);
        eval.insert(eval.end(), part.tokens.begin(), part.tokens.end());
    }
    EXPECT_EQ(tokens, one.tokens);
    EXPECT_EQ(targets, one.targets);
    whole.eval_batch(1, 2, one);
    EXPECT_EQ(eval, one.tokens);
    BatchSampler s(d, 0.1, 2, 16, 5);
    EXPECT_THROW(s.set_shard(0, 3), std::invalid_argument);  // a rank without a row
}
