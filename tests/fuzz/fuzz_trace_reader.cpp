// libFuzzer harness of the trace reader, aimed at its own checks rather than libhdf5's
// parser: the input is a list of patches applied to a small valid trace (written once),
// each one field of one row set to any 64-bit value (HDF5 clips it to the column's
// type) or one dataset's extent changed. Then everything is read as inspect, export and
// the GUI read it. The result is a trace or a TraceError naming the file; its work and
// memory stay bounded by the file's size whatever the numbers say.
//
// Patch (12 bytes): u8 target, u8 unused, u16 row, i64 value. Targets below kFields are
// (dataset, column); the next kExtents set a dataset's row count to value % 4096.
#include <hdf5.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "capture/read_everything.h"
#include "fuzz_input.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {

struct Field {
    const char* dataset;
    const char* column;
};
constexpr Field kFields[] = {
    {"/operands/table", "hist_min_exp"},   {"/operands/table", "hist_offset"},    {"/operands/table", "hist_count"},
    {"/operands/table", "errors_offset"},  {"/operands/table", "errors_count"},   {"/operands/table", "channel_offset"},
    {"/operands/table", "channel_count"},  {"/operands/table", "top_offset"},     {"/operands/table", "top_count"},
    {"/operands/table", "history_offset"}, {"/operands/table", "history_count"},  {"/operands/table", "run"},
    {"/operands/table", "step"},           {"/operands/table", "linear"},         {"/operands/table", "gemm"},
    {"/operands/table", "operand"},        {"/operands/table", "quantizer_in_use"},  {"/blockmaps/table", "offset"},
    {"/blockmaps/table", "count"},         {"/blockmaps/table", "grid_rows"},     {"/blockmaps/table", "grid_cols"},
    {"/blockmaps/table", "recipe"},        {"/blockmaps/table", "run"},           {"/blockmaps/table", "step"},
    {"/blockmaps/table", "linear"},        {"/steps", "run"},                     {"/steps", "step"},
    {"/steps", "recipe"},                  {"/events", "run"},                    {"/events", "step"},
    {"/events", "kind"},                   {"/scaling/index", "run"},             {"/scaling/index", "step"},
    {"/ops", "run"},                       {"/ops", "step"},                      {"/ops", "op"},
    {"/ops", "linear"},                    {"/ops", "layer"},                     {"/ops", "device"},
    {"/ops", "start_ns"},                  {"/ops", "end_ns"},                    {"/meta/linears", "layer"},
    {"/meta/linears", "in_features"},      {"/operands/errors", "recipe"},
};
constexpr const char* kExtents[] = {
    "/meta/runs", "/meta/linears", "/meta/recipes", "/meta/training_recipes", "/meta/ops", "/steps", "/events",
    "/scaling/index", "/scaling/amax", "/scaling/scale", "/operands/table", "/operands/errors",
    "/operands/histogram", "/operands/channel_absmax", "/operands/top", "/operands/amax_history",
    "/blockmaps/table", "/blockmaps/absmax", "/blockmaps/scale_inv", "/blockmaps/sqnr_db", "/ops",
};
constexpr std::size_t kTargets = std::size(kFields) + std::size(kExtents);

// A small trace with rows in every table: 2 runs, 2 linears, 3 recipes, 4 steps.
std::vector<char> template_bytes() {
    TraceMeta m;
    m.tool_version = "fuzz";
    m.config_json = "{}";
    m.runs = {{"a", "baseline"}, {"b", "delayed"}};
    m.linears = {{"l0", 0, 8, 24}, {"l1", 0, 8, 32}};
    m.quantizers = {"current_e4m3", "block1x128_e4m3_pow2", "mxfp8_e4m3_rceil"};
    m.training_recipes = {"baseline", "delayed"};
    m.ops = {"fprop", "dgrad"};
    m.capture_every = 2;
    const std::string path = std::string("/tmp/fp8scope-fuzz-template-") + std::to_string(::getpid()) + ".h5";
    {
        TraceWriter w(path, m);
        w.write(EventRecord{-1, 0, EventKind::Start, ""});
        for (std::int64_t s = 0; s < 4; ++s)
            for (int run = 0; run < 2; ++run) {
                const std::size_t slots = m.linears.size() * kOperandsPerLinear;
                ScalingRecord sc{run, s, std::vector<float>(slots, 1.0f), std::vector<float>(slots, 2.0f)};
                w.write(sc);
                if (s % 2 == 0) {
                    OperandRecord o;
                    o.key = {run, s, 1, Gemm::Fprop, Operand::X};
                    o.quantizer_in_use = run;
                    for (int e = -3; e <= 3; ++e) o.stats.histogram.bins[e - kHistMinExp] = 10 + e;
                    o.stats.outliers.channel_absmax = {1, 2, 3};
                    o.stats.outliers.top = {{4.0f, 1, 2}};
                    o.amax_history = {1.0f, 2.0f};
                    o.errors.resize(3);
                    w.write(o);
                    BlockMapRecord b;
                    b.key = o.key;
                    b.quantizer = 1;
                    b.grid_rows = 1;
                    b.grid_cols = 2;
                    b.absmax = b.scale_inv = b.sqnr_db = {1.0f, 2.0f};
                    w.write(b);
                }
                w.write(OpRecord{run, s, 1, 0, 0, -1, 0, s * 100, s * 100 + 50});
                w.write(StepRecord{run, s, 1.0});
            }
        w.write(EventRecord{0, 3, EventKind::Pause, "p"});
        w.close();
    }
    std::ifstream f(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), {});
    std::remove(path.c_str());
    return bytes;
}

void apply(const std::string& file, const std::uint8_t* data, std::size_t size) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return;
    for (std::size_t at = 0; at + 12 <= size && at < 12 * 16; at += 12) {
        const std::size_t target = data[at] % kTargets;
        std::uint16_t row;
        std::int64_t value;
        std::memcpy(&row, data + at + 2, 2);
        std::memcpy(&value, data + at + 4, 8);
        if (target < std::size(kFields)) {
            hid_t d = H5Dopen2(f, kFields[target].dataset, H5P_DEFAULT);
            if (d < 0) continue;
            hid_t mem = H5Tcreate(H5T_COMPOUND, sizeof value);
            H5Tinsert(mem, kFields[target].column, 0, H5T_NATIVE_INT64);
            hid_t space = H5Dget_space(d);
            hsize_t start = row, count = 1;
            hid_t one = H5Screate_simple(1, &count, nullptr);
            if (H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &count, nullptr) >= 0 &&
                H5Sselect_valid(space) > 0)
                H5Dwrite(d, mem, one, space, H5P_DEFAULT, &value);
            H5Sclose(one);
            H5Sclose(space);
            H5Tclose(mem);
            H5Dclose(d);
        } else {
            hid_t d = H5Dopen2(f, kExtents[target - std::size(kFields)], H5P_DEFAULT);
            if (d < 0) continue;
            hid_t space = H5Dget_space(d);
            hsize_t dims[2] = {0, 0};
            const int rank = H5Sget_simple_extent_dims(space, dims, nullptr);
            dims[0] = static_cast<hsize_t>(value) % 4096;
            if (rank >= 1) H5Dset_extent(d, dims);
            H5Sclose(space);
            H5Dclose(d);
        }
    }
    H5Fclose(f);
}

}  // namespace
}  // namespace fp8scope::trace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace fp8scope;
    static const std::vector<char> good = trace::template_bytes();
    const std::string path = fuzz::input_file(reinterpret_cast<const std::uint8_t*>(good.data()), good.size(), ".h5");
    trace::apply(path, data, size);
    try {
        trace::testing::read_everything_of(path, 4);
    } catch (const trace::TraceError&) {
    }
    try {  // as a large trace: the newest steps indexed, the step table scanned
        trace::testing::read_everything_of(path, 4, {.min_step_rows = 1, .tail_steps = 2});
    } catch (const trace::TraceError&) {
    }
    return 0;
}
