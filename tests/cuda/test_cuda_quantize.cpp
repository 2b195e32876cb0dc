// The CUDA FP8 cast (kernels/cuda/cast/quantize.h) against the CPU's quantize(): every code,
// scale_inv, E8M0 code, the amax, the scale and the overflow counts bit for bit, for the
// rowwise copy (quantize(x)) and the columnwise copy (quantize(x^T)), over a grid of
// recipe x shape x input dtype with data that holds zeros, subnormals, values past
// fp8_max after scaling, +-Inf and NaN. Also: delayed scaling's device history step by
// step against DelayedState, the dequantize kernels against decode(code) * scale_inv,
// unaligned buffers, single copies, empty tensors, and the element cast over all 2^32
// float32 bit patterns against cast::cast_code (what licenses the hardware conversion).
//
// Outputs are filled with 0xCD before every cast, so a kernel that skips an element fails.
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/quantize.h"
#include "cuda/cast/quantize.h"
#include "fp8/cast_rules.h"
#include "fp8/format.h"
#include "fp8/scaling.h"
#include "gpu_test.h"
#include "io/half.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

using testing::GpuBuffer;

struct Shape {
    std::int64_t rows, cols;
};

std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// --- data ------------------------------------------------------------------------------

enum class Kind {
    Gaussian,  // N(0,1) with a few outliers (x100) and no zeros
    Specials,  // N(0,1) with zeros, subnormals, tiny and huge values, +-Inf, NaN
    Wide,      // signs and exponents log-uniform over 2^-40 .. 2^40, some zeros
};
const char* kind_name(Kind k) { return k == Kind::Gaussian ? "gaussian" : k == Kind::Specials ? "specials" : "wide"; }

std::vector<float> make_data(Kind kind, std::int64_t rows, std::int64_t cols, unsigned seed) {
    std::mt19937_64 rng(seed * 7919u + rows * 31u + cols);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    std::vector<float> x(std::size_t(rows * cols));
    for (float& v : x) {
        const float u = uni(rng);
        switch (kind) {
        case Kind::Gaussian:
            v = normal(rng);
            if (v == 0.0f) v = 0.5f;
            if (u < 0.002f) v *= 100.0f;
            break;
        case Kind::Specials:
            v = normal(rng);
            if (u < 0.03f) v = 0.0f;
            else if (u < 0.04f) v = -0.0f;
            else if (u < 0.06f) v = std::ldexp(normal(rng), -135);  // float32 subnormal
            else if (u < 0.08f) v *= 1e-6f;
            else if (u < 0.09f) v *= 1e6f;
            else if (u < 0.0905f) v = FLT_MAX * (normal(rng) < 0 ? -1.0f : 1.0f);
            else if (u < 0.0915f) v = std::numeric_limits<float>::infinity();
            else if (u < 0.0925f) v = -std::numeric_limits<float>::infinity();
            else if (u < 0.0935f) v = std::numeric_limits<float>::quiet_NaN();
            else if (u < 0.0940f) v = -std::numeric_limits<float>::quiet_NaN();
            break;
        case Kind::Wide:
            v = u < 0.02f ? 0.0f : std::ldexp(1.0f + uni(rng), int(uni(rng) * 80.0f) - 40) * (normal(rng) < 0 ? -1.0f : 1.0f);
            break;
        }
    }
    return x;
}

std::vector<float> transpose(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
    std::vector<float> t(x.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
    return t;
}

// x on the device as `dtype`; `values` holds what the CPU sees (BF16: the float of each
// BF16). `offset` elements of padding in front misalign the data on purpose.
struct DeviceInput {
    std::vector<float> values;
    DType dtype;
    std::int64_t rows, cols, offset;
    std::unique_ptr<GpuBuffer<float>> f32;
    std::unique_ptr<GpuBuffer<std::uint16_t>> bf16;

    DeviceInput(std::vector<float> x, DType t, std::int64_t r, std::int64_t c, std::int64_t off = 0)
        : values(std::move(x)), dtype(t), rows(r), cols(c), offset(off) {
        const std::size_t n = values.size() + std::size_t(off);
        if (t == DType::BF16) {
            std::vector<std::uint16_t> b(std::max<std::size_t>(1, n), 0);
            for (std::size_t i = 0; i < values.size(); ++i) {
                b[i + off] = float_to_bf16(values[i]);
                values[i] = bf16_to_float(b[i + off]);
            }
            bf16 = std::make_unique<GpuBuffer<std::uint16_t>>(b);
        } else {
            std::vector<float> f(std::max<std::size_t>(1, n), 0.0f);
            std::copy(values.begin(), values.end(), f.begin() + off);
            f32 = std::make_unique<GpuBuffer<float>>(f);
        }
    }
    cuda::CastInput desc() const {
        const void* p = dtype == DType::BF16 ? static_cast<const void*>(bf16->get() + offset)
                                             : static_cast<const void*>(f32->get() + offset);
        return {p, dtype, rows, cols};
    }
};

// The outputs of one cast, prefilled with 0xCD.
struct DeviceCast {
    cuda::ScaleGrid rg, cg;
    GpuBuffer<std::uint8_t> row, col, row_e8m0, col_e8m0;
    GpuBuffer<float> row_sinv, col_sinv;
    GpuBuffer<cuda::CastStats> stats;
    std::int64_t offset;
    bool want_row, want_col;

    DeviceCast(const Recipe& r, std::int64_t rows, std::int64_t cols, bool rw = true, bool cw = true,
               std::int64_t off = 0)
        : rg(cuda::scale_grid(r, rows, cols)), cg(cuda::scale_grid(r, cols, rows)),
          row(std::size_t(rows * cols + off + 1)), col(std::size_t(rows * cols + off + 1)),
          row_e8m0(std::size_t(rg.size() + 1)), col_e8m0(std::size_t(cg.size() + 1)),
          row_sinv(std::size_t(rg.size() + 1)), col_sinv(std::size_t(cg.size() + 1)), stats(1), offset(off),
          want_row(rw), want_col(cw) {
        FP8SCOPE_CUDA_CHECK(cudaMemset(row.get(), 0xCD, row.size()));
        FP8SCOPE_CUDA_CHECK(cudaMemset(col.get(), 0xCD, col.size()));
        FP8SCOPE_CUDA_CHECK(cudaMemset(row_e8m0.get(), 0xCD, row_e8m0.size()));
        FP8SCOPE_CUDA_CHECK(cudaMemset(col_e8m0.get(), 0xCD, col_e8m0.size()));
        FP8SCOPE_CUDA_CHECK(cudaMemset(row_sinv.get(), 0xCD, row_sinv.size() * 4));
        FP8SCOPE_CUDA_CHECK(cudaMemset(col_sinv.get(), 0xCD, col_sinv.size() * 4));
        FP8SCOPE_CUDA_CHECK(cudaMemset(stats.get(), 0xCD, sizeof(cuda::CastStats)));
    }
    cuda::CastTarget target() {
        cuda::CastTarget t;
        if (want_row) t = {row.get() + offset, row_sinv.get(), row_e8m0.get(), nullptr, nullptr, nullptr, stats.get()};
        if (want_col) t.columnwise = col.get() + offset, t.columnwise_scale_inv = col_sinv.get(), t.columnwise_e8m0 = col_e8m0.get();
        t.stats = stats.get();
        return t;
    }
};

// --- comparisons -------------------------------------------------------------------------

template <class T>
std::vector<T> download(const GpuBuffer<T>& b, std::int64_t from, std::int64_t n) {
    std::vector<T> all = b.download();
    return std::vector<T>(all.begin() + from, all.begin() + from + n);
}

// A scale_inv or E8M0 grid as stored (ScaleGrid::transposed or not), in row-major order.
template <class T>
std::vector<T> row_major(const cuda::ScaleGrid& g, const GpuBuffer<T>& b) {
    const std::vector<T> stored = download(b, 0, g.size());
    std::vector<T> out(stored.size());
    for (std::int64_t gr = 0; gr < g.rows; ++gr)
        for (std::int64_t gc = 0; gc < g.cols; ++gc)
            out[std::size_t(gr * g.cols + gc)] = stored[std::size_t(g.index(gr, gc))];
    return out;
}

// One copy against the CPU's QuantizedTensor of the same matrix (x: its values).
::testing::AssertionResult same_copy(const QuantizedTensor& want, const std::vector<std::uint8_t>& codes,
                                     const std::vector<float>& sinv, const std::vector<std::uint8_t>& e8m0,
                                     bool mx, const std::vector<float>& x) {
    std::int64_t bad = 0;
    std::ostringstream msg;
    for (std::size_t i = 0; i < want.codes.size(); ++i) {
        if (codes[i] != want.codes[i]) {
            if (bad++ < 5)
                msg << "\n  code at (" << i / want.cols << ", " << i % want.cols << ") x=" << x[i] << ": got 0x"
                    << std::hex << int(codes[i]) << " want 0x" << int(want.codes[i]) << std::dec;
        }
    }
    for (std::size_t i = 0; i < want.scale_inv.size(); ++i) {
        if (bits(sinv[i]) != bits(want.scale_inv[i])) {
            if (bad++ < 10)
                msg << "\n  scale_inv[" << i << "]: got " << sinv[i] << " (0x" << std::hex << bits(sinv[i])
                    << ") want " << want.scale_inv[i] << " (0x" << bits(want.scale_inv[i]) << ")" << std::dec;
        }
        if (mx && e8m0[i] != want.scale_e8m0[i]) {
            if (bad++ < 10) msg << "\n  e8m0[" << i << "]: got " << int(e8m0[i]) << " want " << int(want.scale_e8m0[i]);
        }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " mismatches" << msg.str();
}

struct RecipeCase {
    std::string name;
    Recipe recipe;
};

void PrintTo(const RecipeCase& r, std::ostream* os) { *os << r.name; }
void PrintTo(const Shape& s, std::ostream* os) { *os << s.rows << "x" << s.cols; }

std::vector<RecipeCase> grid_recipes() {
    std::vector<Recipe> r = {
        CurrentScaling{Format::E4M3},
        CurrentScaling{Format::E5M2},
        CurrentScaling{Format::E4M3, 1e-3f, true},
        CurrentScaling{Format::E5M2, 0.0f, true},
        DelayedScaling{Format::E4M3, 16, AmaxAlgo::Max, 0},
        DelayedScaling{Format::E5M2, 4, AmaxAlgo::MostRecent, 1},
        BlockScaling{Format::E4M3, 1, 128, false},
        BlockScaling{Format::E4M3, 1, 128, true},
        BlockScaling{Format::E4M3, 128, 128, true},
        BlockScaling{Format::E4M3, 128, 128, false},
        BlockScaling{Format::E5M2, 1, 128, false},
        BlockScaling{Format::E4M3, 2, 8, false},     // tiles 128: shared-memory cells
        BlockScaling{Format::E4M3, 16, 64, true},
        BlockScaling{Format::E5M2, 64, 32, false},
        BlockScaling{Format::E4M3, 3, 40, false},    // divides nothing: the grid fallback
        BlockScaling{Format::E4M3, 1, 1, false},
        BlockScaling{Format::E4M3, 256, 64, true},   // larger than a tile
        MXScaling{Format::E4M3, MXRule::RCeil, 32},
        MXScaling{Format::E4M3, MXRule::Floor, 32},
        MXScaling{Format::E5M2, MXRule::RCeil, 32},
        MXScaling{Format::E5M2, MXRule::Floor, 32},
        MXScaling{Format::E4M3, MXRule::RCeil, 16},
        MXScaling{Format::E4M3, MXRule::Floor, 20},  // grid fallback
    };
    std::vector<RecipeCase> out;
    for (const Recipe& x : r) {
        std::string n = recipe_name(x);
        for (char& ch : n)
            if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
        out.push_back({n, x});
    }
    return out;
}

const std::vector<Shape> kShapes = {{1, 1},     {1, 16},    {3, 40},     {17, 33},    {127, 129},
                                    {217, 256}, {128, 128}, {257, 1000}, {1024, 4096}};

// A delayed recipe's state before the cast: a history whose scale makes the largest
// values overflow (the reference amax is a third of the data's).
DelayedState delayed_start(const DelayedScaling& d, const std::vector<float>& x) {
    DelayedState st(d);
    float m = 0.0f;
    for (float v : x)
        if (std::isfinite(v)) m = std::max(m, std::fabs(v));
    st.push(m > 0.0f ? m / 3.0f : 1.0f);
    st.push(m > 0.0f ? m / 5.0f : 2.0f);
    return st;
}

// Casts `in` on the device (both copies unless told) and checks everything against the
// CPU. `state`: delayed scaling's host state before the cast, advanced by the push.
void check_cast(const DeviceInput& in, const Recipe& recipe, bool want_row = true, bool want_col = true,
                std::int64_t out_offset = 0) {
    const std::int64_t rows = in.rows, cols = in.cols;
    DeviceCast dev(recipe, rows, cols, want_row, want_col, out_offset);
    const auto* delayed = std::get_if<DelayedScaling>(&recipe);
    std::optional<DelayedState> state;
    std::unique_ptr<GpuBuffer<std::uint8_t>> dstate;
    if (delayed) {
        state = delayed_start(*delayed, in.values);
        dstate = std::make_unique<GpuBuffer<std::uint8_t>>(cuda::delayed_state_bytes(*delayed));
        cuda::delayed_state_write(dstate->get(), *state, nullptr);
    }
    cuda::cast(in.desc(), recipe, dev.target(), nullptr, dstate ? dstate->get() : nullptr, true);
    FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());

    const float scale_before = state ? state->scale() : 1.0f;
    std::optional<DelayedState> row_state = state, col_state = state;
    const MatrixView x{in.values.data(), rows, cols};
    const QuantizedTensor want_r = quantize(x, recipe, row_state ? &*row_state : nullptr);
    const std::vector<float> xt = transpose(in.values, rows, cols);
    const QuantizedTensor want_c = quantize(MatrixView{xt.data(), cols, rows}, recipe, col_state ? &*col_state : nullptr);
    const bool mx = std::holds_alternative<MXScaling>(recipe);

    const cuda::CastStats stats = dev.stats.download()[0];
    const float amax = scaling_amax(x);
    EXPECT_EQ(bits(stats.amax), bits(amax)) << "amax " << stats.amax << " want " << amax;
    if (const auto* c = std::get_if<CurrentScaling>(&recipe)) {
        EXPECT_EQ(bits(stats.scale), bits(compute_scale(amax, c->format, c->eps, c->pow2)));
    } else if (delayed) {
        EXPECT_EQ(bits(stats.scale), bits(scale_before));
    } else {
        EXPECT_TRUE(std::isnan(stats.scale)) << stats.scale;
    }
    if (want_row) {
        EXPECT_TRUE(same_copy(want_r, download(dev.row, out_offset, rows * cols), row_major(dev.rg, dev.row_sinv),
                              row_major(dev.rg, dev.row_e8m0), mx, in.values))
            << "rowwise";
        EXPECT_EQ(stats.overflow_rowwise, static_cast<unsigned long long>(want_r.overflow)) << "rowwise overflow";
    }
    if (want_col) {
        EXPECT_TRUE(same_copy(want_c, download(dev.col, out_offset, rows * cols), row_major(dev.cg, dev.col_sinv),
                              row_major(dev.cg, dev.col_e8m0), mx, xt))
            << "columnwise";
        EXPECT_EQ(stats.overflow_columnwise, static_cast<unsigned long long>(want_c.overflow)) << "columnwise overflow";
    }
    if (state) {
        const DelayedState got = cuda::delayed_state_read(dstate->get(), *delayed, nullptr);
        EXPECT_EQ(bits(got.scale()), bits(row_state->scale())) << "next scale";
        ASSERT_EQ(got.history().size(), row_state->history().size());
        for (std::size_t i = 0; i < got.history().size(); ++i)
            EXPECT_EQ(bits(got.history()[i]), bits(row_state->history()[i])) << "history " << i;
    }
}

// --- the grid ----------------------------------------------------------------------------

class CastGrid : public ::testing::TestWithParam<std::tuple<RecipeCase, Shape, DType>> {};

TEST_P(CastGrid, MatchesCpuBitForBit) {
    FP8SCOPE_REQUIRE_GPU();
    const auto& [rc, shape, dtype] = GetParam();
    for (Kind kind : {Kind::Gaussian, Kind::Specials, Kind::Wide}) {
        SCOPED_TRACE(kind_name(kind));
        const DeviceInput in(make_data(kind, shape.rows, shape.cols, 1), dtype, shape.rows, shape.cols);
        check_cast(in, rc.recipe);
        if (HasFatalFailure()) return;
    }
}

std::string grid_name(const ::testing::TestParamInfo<CastGrid::ParamType>& info) {
    const auto& [rc, shape, dtype] = info.param;
    return rc.name + "_" + std::to_string(shape.rows) + "x" + std::to_string(shape.cols) + "_" + dtype_name(dtype);
}

INSTANTIATE_TEST_SUITE_P(All, CastGrid,
                         ::testing::Combine(::testing::ValuesIn(grid_recipes()), ::testing::ValuesIn(kShapes),
                                            ::testing::Values(DType::F32, DType::BF16)),
                         grid_name);

// --- scale grid layout ---------------------------------------------------------------------

// Host code: every entry of a grid at its own place in [0, size), the place its steps give,
// neighbours along the stored direction one apart; which recipes store transposed.
TEST(ScaleGridLayout, IndexCoversTheGridOnceByItsSteps) {
    for (bool transposed : {false, true}) {
        const cuda::ScaleGrid g{1, 32, 3, 5, transposed};
        std::vector<int> seen(std::size_t(g.size()), 0);
        for (std::int64_t gr = 0; gr < g.rows; ++gr)
            for (std::int64_t gc = 0; gc < g.cols; ++gc) {
                const std::int64_t i = g.index(gr, gc);
                ASSERT_GE(i, 0);
                ASSERT_LT(i, g.size());
                ++seen[std::size_t(i)];
                EXPECT_EQ(i, gr * g.row_step() + gc * g.col_step());
                EXPECT_TRUE(g.contains(gr, gc));
            }
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), g.size());
        EXPECT_FALSE(g.contains(3, 0));
        EXPECT_FALSE(g.contains(0, 5));
        EXPECT_EQ(g.index(2, 4), transposed ? 4 * 3 + 2 : 2 * 5 + 4);  // the last entry either way: 14
        EXPECT_EQ(g.index(1, 0), transposed ? 1 : 5);
    }
    EXPECT_TRUE(cuda::scale_grid(MXScaling{Format::E4M3, MXRule::RCeil, 32}, 33, 64).transposed);
    EXPECT_FALSE(cuda::scale_grid(MXScaling{Format::E4M3, MXRule::RCeil, 16}, 33, 64).transposed);
    EXPECT_TRUE(cuda::scale_grid(BlockScaling{Format::E4M3, 1, 128, false}, 32, 256).transposed);
    EXPECT_FALSE(cuda::scale_grid(BlockScaling{Format::E4M3, 1, 128, false}, 33, 256).transposed);
    EXPECT_FALSE(cuda::scale_grid(BlockScaling{Format::E4M3, 128, 128, true}, 256, 256).transposed);
}

// --- layouts -----------------------------------------------------------------------------

TEST(CudaCast, EachCopyAlone) {
    FP8SCOPE_REQUIRE_GPU();
    for (const RecipeCase& rc : grid_recipes()) {
        SCOPED_TRACE(rc.name);
        const DeviceInput in(make_data(Kind::Specials, 200, 264, 3), DType::BF16, 200, 264);
        check_cast(in, rc.recipe, true, false);
        check_cast(in, rc.recipe, false, true);
    }
}

// The E8M0 grids are optional: an MX cast without them writes the same codes and scale_inv
// grids as one with them (checked against the CPU elsewhere) and leaves their memory alone.
TEST(CudaCast, MxWithoutE8m0Grids) {
    FP8SCOPE_REQUIRE_GPU();
    auto bit_patterns = [](const std::vector<float>& v) {
        std::vector<std::uint32_t> out;
        for (float f : v) out.push_back(bits(f));
        return out;
    };
    int cases = 0;
    for (const RecipeCase& rc : grid_recipes()) {
        if (!std::holds_alternative<MXScaling>(rc.recipe)) continue;
        SCOPED_TRACE(rc.name);
        ++cases;
        const std::int64_t rows = 130, cols = 264;
        const DeviceInput in(make_data(Kind::Specials, rows, cols, 5), DType::BF16, rows, cols);
        DeviceCast with(rc.recipe, rows, cols), without(rc.recipe, rows, cols);
        cuda::CastTarget t = without.target();
        t.rowwise_e8m0 = t.columnwise_e8m0 = nullptr;
        cuda::cast(in.desc(), rc.recipe, with.target(), nullptr);
        cuda::cast(in.desc(), rc.recipe, t, nullptr);
        FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_EQ(without.row.download(), with.row.download());
        EXPECT_EQ(without.col.download(), with.col.download());
        EXPECT_EQ(bit_patterns(without.row_sinv.download()), bit_patterns(with.row_sinv.download()));
        EXPECT_EQ(bit_patterns(without.col_sinv.download()), bit_patterns(with.col_sinv.download()));
        EXPECT_EQ(without.row_e8m0.download(), std::vector<std::uint8_t>(without.row_e8m0.size(), 0xCD));
        EXPECT_EQ(without.col_e8m0.download(), std::vector<std::uint8_t>(without.col_e8m0.size(), 0xCD));
    }
    EXPECT_GE(cases, 2);
}

TEST(CudaCast, NeitherCopyStillReportsAmax) {
    FP8SCOPE_REQUIRE_GPU();
    for (const RecipeCase& rc : grid_recipes()) {
        SCOPED_TRACE(rc.name);
        const DeviceInput in(make_data(Kind::Specials, 130, 260, 4), DType::F32, 130, 260);
        check_cast(in, rc.recipe, false, false);
    }
}

// Shapes whose rows are 16-byte multiples, but the input and the codes start one element
// off: the scalar loads and byte stores take over.
TEST(CudaCast, UnalignedBuffers) {
    FP8SCOPE_REQUIRE_GPU();
    for (DType t : {DType::F32, DType::BF16}) {
        for (const RecipeCase& rc : grid_recipes()) {
            SCOPED_TRACE(rc.name + " " + dtype_name(t));
            const DeviceInput in(make_data(Kind::Gaussian, 256, 384, 5), t, 256, 384, 1);
            check_cast(in, rc.recipe, true, true, 1);
        }
    }
}

// More row tiles of 128 than a grid's y dimension holds (65535): the CTAs loop over
// row tiles. Three columns: no vector loads or stores anywhere.
TEST(CudaCast, TallTensor) {
    FP8SCOPE_REQUIRE_GPU();
    const std::int64_t rows = 65536 * 128 + 300, cols = 3;
    const DeviceInput in(make_data(Kind::Specials, rows, cols, 6), DType::BF16, rows, cols);
    check_cast(in, BlockScaling{Format::E4M3, 1, 128, false});
    check_cast(in, CurrentScaling{Format::E4M3});
}

TEST(CudaCast, EmptyTensors) {
    FP8SCOPE_REQUIRE_GPU();
    for (const Shape s : {Shape{0, 5}, Shape{5, 0}}) {
        for (const RecipeCase& rc : grid_recipes()) {
            SCOPED_TRACE(rc.name);
            const DeviceInput in({}, DType::F32, s.rows, s.cols);
            DeviceCast dev(rc.recipe, s.rows, s.cols);
            cuda::cast(in.desc(), rc.recipe, dev.target(), nullptr);
            FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());
            const cuda::CastStats st = dev.stats.download()[0];
            EXPECT_EQ(bits(st.amax), 0u);
            EXPECT_EQ(st.overflow_rowwise, 0u);
            EXPECT_EQ(st.overflow_columnwise, 0u);
        }
    }
}

TEST(CudaCast, RejectsBadArguments) {
    FP8SCOPE_REQUIRE_GPU();
    const DeviceInput in(make_data(Kind::Gaussian, 4, 4, 1), DType::F32, 4, 4);
    DeviceCast dev(CurrentScaling{}, 4, 4);
    cuda::CastTarget t = dev.target();
    t.rowwise_scale_inv = nullptr;
    EXPECT_THROW(cuda::cast(in.desc(), CurrentScaling{}, t, nullptr), std::invalid_argument);
    EXPECT_THROW(cuda::cast(in.desc(), BlockScaling{Format::E4M3, 0, 128, false}, dev.target(), nullptr),
                 std::invalid_argument);
    cuda::CastInput bad = in.desc();
    bad.dtype = DType::E4M3;
    EXPECT_THROW(cuda::cast(bad, CurrentScaling{}, dev.target(), nullptr), std::invalid_argument);
}

TEST(CudaCast, ScalingAmaxMatchesCpu) {
    FP8SCOPE_REQUIRE_GPU();
    for (DType t : {DType::F32, DType::BF16}) {
        for (const Shape s : kShapes) {
            for (std::int64_t off : {0, 1}) {
                const DeviceInput in(make_data(Kind::Specials, s.rows, s.cols, 8), t, s.rows, s.cols, off);
                GpuBuffer<float> amax(1);
                cuda::scaling_amax(in.desc(), amax.get(), nullptr);
                const float want = scaling_amax(MatrixView{in.values.data(), s.rows, s.cols});
                EXPECT_EQ(bits(amax.download()[0]), bits(want)) << s.rows << "x" << s.cols << " " << dtype_name(t);
            }
        }
    }
}

// --- delayed scaling ---------------------------------------------------------------------

// Ten steps of delayed scaling on a ring shorter than the run: the amax grows, shrinks,
// is Inf once, 0 once (all zeros) and NaN once (pushed directly: a cast's amax never is);
// after each step the device history and scale equal DelayedState's.
TEST(CudaDelayed, TenStepsMatchDelayedState) {
    FP8SCOPE_REQUIRE_GPU();
    const std::int64_t rows = 96, cols = 160;
    const float factors[] = {1.0f, 4.0f, 0.25f, -1.0f /*inf*/, 0.0f, 8.0f, 2.0f, 1e-20f, 3.0f, 1.0f};
    for (AmaxAlgo algo : {AmaxAlgo::Max, AmaxAlgo::MostRecent}) {
        for (int margin : {0, 2}) {
            const DelayedScaling d{Format::E4M3, 4, algo, margin};
            SCOPED_TRACE(recipe_name(d));
            DelayedState host(d);
            GpuBuffer<std::uint8_t> dstate(cuda::delayed_state_bytes(d));
            cuda::delayed_state_write(dstate.get(), host, nullptr);
            for (int step = 0; step < 10; ++step) {
                SCOPED_TRACE("step " + std::to_string(step));
                std::vector<float> x = make_data(Kind::Gaussian, rows, cols, 20 + step);
                for (float& v : x) v = factors[step] < 0 ? v : v * factors[step];
                if (factors[step] < 0) x[17] = std::numeric_limits<float>::infinity();
                const DeviceInput in(std::move(x), DType::BF16, rows, cols);
                DeviceCast dev(d, rows, cols);
                cuda::cast(in.desc(), d, dev.target(), nullptr, dstate.get(), true);
                FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());
                DelayedState col_state = host;
                const QuantizedTensor want = quantize(MatrixView{in.values.data(), rows, cols}, d, &host);
                const std::vector<float> xt = transpose(in.values, rows, cols);
                const QuantizedTensor want_c = quantize(MatrixView{xt.data(), cols, rows}, d, &col_state);
                ASSERT_TRUE(same_copy(want, download(dev.row, 0, rows * cols), download(dev.row_sinv, 0, 1), {}, false, in.values));
                ASSERT_TRUE(same_copy(want_c, download(dev.col, 0, rows * cols), download(dev.col_sinv, 0, 1), {}, false, xt));
                EXPECT_EQ(dev.stats.download()[0].overflow_rowwise, static_cast<unsigned long long>(want.overflow));
                if (step == 6) {  // a NaN amax: keeps the scale under both algos, poisons max
                    GpuBuffer<float> nan(std::vector<float>{std::numeric_limits<float>::quiet_NaN()});
                    cuda::delayed_push(dstate.get(), d, nan.get(), nullptr);
                    host.push(std::numeric_limits<float>::quiet_NaN());
                }
                const DelayedState got = cuda::delayed_state_read(dstate.get(), d, nullptr);
                ASSERT_EQ(bits(got.scale()), bits(host.scale())) << got.scale() << " vs " << host.scale();
                ASSERT_EQ(got.history().size(), host.history().size());
                for (std::size_t i = 0; i < host.history().size(); ++i)
                    ASSERT_EQ(bits(got.history()[i]), bits(host.history()[i])) << "history " << i;
            }
        }
    }
}

// Without push the cast reads the scale and leaves the state alone.
TEST(CudaDelayed, CastWithoutPushLeavesState) {
    FP8SCOPE_REQUIRE_GPU();
    const DelayedScaling d{Format::E4M3, 8, AmaxAlgo::Max, 0};
    const DeviceInput in(make_data(Kind::Gaussian, 64, 96, 11), DType::F32, 64, 96);
    DelayedState host = delayed_start(d, in.values);
    const float scale0 = host.scale();
    GpuBuffer<std::uint8_t> dstate(cuda::delayed_state_bytes(d));
    cuda::delayed_state_write(dstate.get(), host, nullptr);
    DeviceCast dev(d, 64, 96);
    cuda::cast(in.desc(), d, dev.target(), nullptr, dstate.get(), false);
    const cuda::CastStats st = dev.stats.download()[0];
    EXPECT_EQ(bits(st.scale), bits(scale0));
    const QuantizedTensor want = quantize(MatrixView{in.values.data(), 64, 96}, d, &host);
    EXPECT_TRUE(same_copy(want, download(dev.row, 0, 64 * 96), download(dev.row_sinv, 0, 1), {}, false, in.values));
    const CastInfo info = cuda::to_cast_info(st, true);
    EXPECT_EQ(info.overflow, want.overflow);
    const DelayedState got = cuda::delayed_state_read(dstate.get(), d, nullptr);
    EXPECT_EQ(got.history().size(), 2u);  // delayed_start's two pushes, not this cast's
    EXPECT_EQ(bits(got.scale()), bits(scale0));
}

// The device state keeps the newest `history` entries of a host state; read gives back
// exactly what was written.
TEST(CudaDelayed, WriteReadRoundTrip) {
    FP8SCOPE_REQUIRE_GPU();
    const DelayedScaling d{Format::E5M2, 5, AmaxAlgo::Max, 0};
    DelayedState host(d);
    std::deque<float> h;
    for (int i = 0; i < 8; ++i) h.push_back(float(i) + 0.5f);
    host.restore(h, 3.25f);
    GpuBuffer<std::uint8_t> dstate(cuda::delayed_state_bytes(d));
    cuda::delayed_state_write(dstate.get(), host, nullptr);
    const DelayedState got = cuda::delayed_state_read(dstate.get(), d, nullptr);
    EXPECT_EQ(got.scale(), 3.25f);
    EXPECT_EQ(got.history(), std::deque<float>(h.end() - 5, h.end()));
    // and a push after it equals DelayedState's push after the same truncation
    GpuBuffer<float> amax(std::vector<float>{100.0f});
    cuda::delayed_push(dstate.get(), d, amax.get(), nullptr);
    host.push(100.0f);
    const DelayedState next = cuda::delayed_state_read(dstate.get(), d, nullptr);
    EXPECT_EQ(bits(next.scale()), bits(host.scale()));
    EXPECT_EQ(next.history(), host.history());
}

// --- dequantize --------------------------------------------------------------------------

// out against decode(code) * scale_inv in float32 (BF16: rounded by float_to_bf16); bits
// equal, or both NaN. `sinv`: the grid in row-major order, however q stores it.
void check_dequantize(const cuda::QuantizedInput& q, const std::vector<std::uint8_t>& codes,
                      const std::vector<float>& sinv, std::int64_t out_offset) {
    const std::int64_t n = q.rows * q.cols, gc = (q.cols + q.block_cols - 1) / q.block_cols;
    GpuBuffer<float> f32(std::size_t(n + out_offset + 1));
    GpuBuffer<std::uint16_t> b16(std::size_t(n + out_offset + 1));
    FP8SCOPE_CUDA_CHECK(cudaMemset(f32.get(), 0xCD, f32.size() * 4));
    FP8SCOPE_CUDA_CHECK(cudaMemset(b16.get(), 0xCD, b16.size() * 2));
    cuda::dequantize(q, f32.get() + out_offset, DType::F32, nullptr);
    cuda::dequantize(q, b16.get() + out_offset, DType::BF16, nullptr);
    const std::vector<float> got = download(f32, out_offset, n);
    const std::vector<std::uint16_t> got16 = download(b16, out_offset, n);
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t r = i / q.cols, c = i % q.cols;
        const float want = decode(q.format, codes[i]) * sinv[(r / q.block_rows) * gc + c / q.block_cols];
        const std::uint16_t want16 = float_to_bf16(want);
        const bool ok = std::isnan(want) ? std::isnan(got[i]) && std::isnan(bf16_to_float(got16[i]))
                                         : bits(got[i]) == bits(want) && got16[i] == want16;
        if (!ok && bad++ < 5)
            ADD_FAILURE() << "at (" << r << ", " << c << ") code 0x" << std::hex << int(codes[i]) << std::dec << ": got "
                          << got[i] << " / bf16 " << bf16_to_float(got16[i]) << ", want " << want;
    }
    EXPECT_EQ(bad, 0);
}

TEST(CudaDequantize, EveryCodeAndScale) {
    FP8SCOPE_REQUIRE_GPU();
    // 256 rows of the 256 codes; block 1x16: each row cycles through 16 scales, NaN,
    // subnormal and huge ones among them.
    const float scales[16] = {1.0f, 0.5f, 3.7f, 1e-3f, 0x1p-127f, 0x1p127f, 0x1p-149f, 65504.0f,
                              std::numeric_limits<float>::quiet_NaN(), 1.0f / 448.0f, 2.0f, 1e30f, 7.0f, 0.1f, 1e-30f, 1.5f};
    const std::int64_t rows = 256, cols = 256;
    std::vector<std::uint8_t> codes(rows * cols);
    for (std::int64_t i = 0; i < rows * cols; ++i) codes[i] = std::uint8_t(i + i / cols);
    std::vector<float> sinv(rows * (cols / 16));
    for (std::size_t i = 0; i < sinv.size(); ++i) sinv[i] = scales[(i * 7) % 16];
    GpuBuffer<std::uint8_t> dcodes(codes);
    GpuBuffer<float> dsinv(sinv);
    for (Format f : {Format::E4M3, Format::E5M2}) {
        SCOPED_TRACE(std::string(name(f)));
        check_dequantize({dcodes.get(), dsinv.get(), f, rows, cols, 1, 16}, codes, sinv, 0);
        check_dequantize({dcodes.get(), dsinv.get(), f, rows, cols, 1, 16}, codes, sinv, 1);  // unaligned out
    }
}

TEST(CudaDequantize, CastOutputs) {
    FP8SCOPE_REQUIRE_GPU();
    for (const Shape s : {Shape{217, 256}, Shape{33, 40}, Shape{128, 384}}) {
        for (const RecipeCase& rc : grid_recipes()) {
            SCOPED_TRACE(rc.name + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols));
            const DeviceInput in(make_data(Kind::Specials, s.rows, s.cols, 9), DType::BF16, s.rows, s.cols);
            DeviceCast dev(rc.recipe, s.rows, s.cols);
            cuda::cast(in.desc(), rc.recipe, dev.target(), nullptr);
            FP8SCOPE_CUDA_CHECK(cudaDeviceSynchronize());
            const Format f = recipe_format(rc.recipe);
            check_dequantize({dev.row.get(), dev.row_sinv.get(), f, s.rows, s.cols, dev.rg.block_rows,
                              dev.rg.block_cols, dev.rg.transposed},
                             download(dev.row, 0, s.rows * s.cols), row_major(dev.rg, dev.row_sinv), 0);
            check_dequantize({dev.col.get(), dev.col_sinv.get(), f, s.cols, s.rows, dev.cg.block_rows,
                              dev.cg.block_cols, dev.cg.transposed},
                             download(dev.col, 0, s.rows * s.cols), row_major(dev.cg, dev.col_sinv), 0);
        }
    }
}

// --- the element cast --------------------------------------------------------------------

// All 2^32 float32 bit patterns through the kernels' element path (hardware conversion
// inside its domain, integer rounding outside) and through the integer rounding alone,
// against cast::cast_code on the CPU.
TEST(CudaElementCast, EveryFloat32MatchesCastCode) {
    FP8SCOPE_REQUIRE_GPU();
    constexpr std::int64_t kChunk = std::int64_t(1) << 28;
    GpuBuffer<std::uint8_t> fast(kChunk), exact(kChunk);
    std::vector<std::uint8_t> hf(kChunk), he(kChunk);
    for (Format f : {Format::E4M3, Format::E5M2}) {
        SCOPED_TRACE(std::string(name(f)));
        for (std::int64_t first = 0; first < (std::int64_t(1) << 32); first += kChunk) {
            cuda::cast_bit_patterns(f, std::uint32_t(first), kChunk, false, fast.get(), nullptr);
            cuda::cast_bit_patterns(f, std::uint32_t(first), kChunk, true, exact.get(), nullptr);
            FP8SCOPE_CUDA_CHECK(cudaMemcpy(hf.data(), fast.get(), kChunk, cudaMemcpyDeviceToHost));
            FP8SCOPE_CUDA_CHECK(cudaMemcpy(he.data(), exact.get(), kChunk, cudaMemcpyDeviceToHost));
            std::int64_t first_bad = kChunk;
            std::mutex mu;
            parallel_for(kChunk, 1 << 20, 0, [&](std::int64_t i0, std::int64_t i1) {
                for (std::int64_t i = i0; i < i1; ++i) {
                    float y;
                    const std::uint32_t b = std::uint32_t(first + i);
                    std::memcpy(&y, &b, 4);
                    const std::uint8_t want = f == Format::E4M3 ? cast::cast_code<Format::E4M3>(y) : cast::cast_code<Format::E5M2>(y);
                    if (hf[i] != want || he[i] != want) {
                        std::lock_guard lock(mu);
                        first_bad = std::min(first_bad, i);
                        return;
                    }
                }
            });
            if (first_bad < kChunk) {
                const std::int64_t i = first_bad;
                const std::uint32_t b = std::uint32_t(first + i);
                float y;
                std::memcpy(&y, &b, 4);
                const std::uint8_t want = f == Format::E4M3 ? cast::cast_code<Format::E4M3>(y) : cast::cast_code<Format::E5M2>(y);
                FAIL() << "float bits 0x" << std::hex << b << " (" << y << "): kernel path 0x" << int(hf[i])
                       << ", integer path 0x" << int(he[i]) << ", cast_code 0x" << int(want);
            }
        }
    }
}

}  // namespace
}  // namespace fp8scope
