// Decoding operand and block-map rows (reader_decode.h).
#include "reader_decode.h"

#include <algorithm>
#include <string>

namespace fp8scope::trace {
namespace s = schema;

void RecordDecoder::check_span(const Dataset& d, std::uint64_t offset, std::uint64_t count, const char* field,
                               hsize_t row) const {
    if (!in_bounds(offset, count, d.rows))
        throw f.fail(std::string(s::kOperands) + " row " + std::to_string(row) + ": " + field + " (offset " +
                     std::to_string(offset) + ", count " + std::to_string(count) + ") points past the end of " +
                     d.path + " (" + std::to_string(d.rows) + " rows)");
}

std::vector<ErrorStats> RecordDecoder::read_errors(const s::OperandSpans& r, hsize_t row, bool names) const {
    std::vector<ErrorStats> out;
    if (r.errors_count == 0) return out;
    if (r.errors_count != meta.quantizers.size())
        throw f.fail(std::string(s::kOperands) + " row " + std::to_string(row) + ": errors_count " +
                     std::to_string(r.errors_count) + " differs from the " +
                     std::to_string(meta.quantizers.size()) + " quantizers");
    check_span(f.errors, r.errors_offset, r.errors_count, "errors", row);
    const auto rows = f.read_table(f.errors, r.errors_offset, r.errors_count);
    out.resize(r.errors_count);
    for (std::size_t i = 0; i < out.size(); ++i) {
        std::int32_t quantizer = -1;
        s::get_row<s::ErrorTable>(rows.data() + i * f.errors.layout.size, quantizer, out[i]);
        if (quantizer != static_cast<std::int32_t>(i))
            throw f.fail(std::string(s::kOperandErrors) + " row " + std::to_string(r.errors_offset + i) +
                         ": quantizer " + std::to_string(quantizer) + ", expected " + std::to_string(i));
        if (names) out[i].recipe = meta.quantizers[i];
    }
    return out;
}

void RecordDecoder::check_quantizer_in_use(std::int32_t quantizer_in_use, hsize_t row) const {
    if (quantizer_in_use < -1 || quantizer_in_use >= static_cast<int>(meta.quantizers.size()))
        throw f.fail(std::string(s::kOperands) + " row " + std::to_string(row) + ": quantizer_in_use " +
                     std::to_string(quantizer_in_use) + " is not in the quantizer table");
}

std::vector<TraceFile::Block> RecordDecoder::read_blocks(const std::vector<unsigned char>& rows, std::size_t n) const {
    struct Range {
        const Dataset* d;
        hsize_t lo = ~hsize_t(0), hi = 0, total = 0;
    } ranges[] = {{&f.histogram}, {&f.errors}, {&f.channel_absmax}, {&f.top}, {&f.amax_history}};
    for (std::size_t i = 0; i < n; ++i) {
        OperandRecord o;
        s::OperandSpans r;
        s::get_row<s::OperandTable>(rows.data() + i * f.operands.layout.size, o, r);
        const std::pair<std::uint64_t, std::uint64_t> spans[] = {{r.hist_offset, r.hist_count},
                                                                 {r.errors_offset, r.errors_count},
                                                                 {r.channel_offset, r.channel_count},
                                                                 {r.top_offset, r.top_count},
                                                                 {r.history_offset, r.history_count}};
        for (std::size_t k = 0; k < std::size(spans); ++k) {
            const auto [offset, count] = spans[k];
            if (count == 0 || !in_bounds(offset, count, ranges[k].d->rows)) continue;
            ranges[k].lo = std::min<hsize_t>(ranges[k].lo, offset);
            ranges[k].hi = std::max<hsize_t>(ranges[k].hi, offset + count);
            ranges[k].total += count;
        }
    }
    std::vector<TraceFile::Block> out;
    for (const Range& g : ranges) {
        if (g.total == 0 || g.hi - g.lo > 2 * g.total + 4096) continue;  // scattered: row by row
        TraceFile::Block b;
        b.d = g.d;
        b.start = g.lo;
        b.count = g.hi - g.lo;
        b.elem = H5Tget_size(g.d->memtype) * (g.d->cols ? g.d->cols : 1);
        b.bytes.resize(b.count * b.elem);
        f.read_rows(*g.d, b.start, b.count, b.bytes.data());
        out.push_back(std::move(b));
    }
    return out;
}

OperandRecord RecordDecoder::decode_operand(const unsigned char* bytes, hsize_t row) const {
    OperandRecord o;
    s::OperandSpans r;
    s::get_row<s::OperandTable>(bytes, o, r);
    check_quantizer_in_use(o.quantizer_in_use, row);
    TensorStats& st = o.stats;
    if (r.hist_count > 0) {
        // 64-bit: min_exp near INT32_MAX must not wrap into a small, "valid" bin index.
        const std::int64_t first_bin = std::int64_t(r.hist_min_exp) - kHistMinExp;
        if (first_bin < 0 || r.hist_count > static_cast<std::uint64_t>(kHistBins) ||
            first_bin + static_cast<std::int64_t>(r.hist_count) > kHistBins)
            throw f.fail(std::string(s::kOperands) + " row " + std::to_string(row) + ": histogram span (min_exp " +
                         std::to_string(r.hist_min_exp) + ", count " + std::to_string(r.hist_count) +
                         ") is outside the exponent range");
        check_span(f.histogram, r.hist_offset, r.hist_count, "histogram", row);
        f.read_rows(f.histogram, r.hist_offset, r.hist_count, &st.histogram.bins[std::size_t(first_bin)]);
    }
    check_span(f.channel_absmax, r.channel_offset, r.channel_count, "channel_absmax", row);
    st.outliers.channel_absmax = f.read_range<float>(f.channel_absmax, r.channel_offset, r.channel_count);
    check_span(f.top, r.top_offset, r.top_count, "top", row);
    st.outliers.top = f.read_records<s::TopTable>(f.top, r.top_offset, r.top_count);
    check_span(f.amax_history, r.history_offset, r.history_count, "amax_history", row);
    o.amax_history = f.read_range<float>(f.amax_history, r.history_offset, r.history_count);
    o.errors = read_errors(r, row, true);
    return o;
}

void RecordDecoder::check_blockmap(const unsigned char* bytes, hsize_t row) const {
    BlockMapRecord b;
    s::BlockMapSpan r;
    s::get_row<s::BlockMapTable>(bytes, b, r);
    std::string where = std::string(s::kBlockMaps) + " row " + std::to_string(row) + ": ";
    if (b.quantizer < 0 || b.quantizer >= static_cast<int>(meta.quantizers.size()))
        throw f.fail(where + "quantizer " + std::to_string(b.quantizer) + " is not in the quantizer table");
    if (b.grid_rows < 0 || b.grid_cols < 0 ||
        static_cast<std::uint64_t>(b.grid_rows) * static_cast<std::uint64_t>(b.grid_cols) != r.count)
        throw f.fail(where + "grid " + std::to_string(b.grid_rows) + "x" + std::to_string(b.grid_cols) +
                     " does not match count " + std::to_string(r.count));
    for (const Dataset* d : {&f.block_absmax, &f.block_scale_inv, &f.block_sqnr})
        if (!in_bounds(r.offset, r.count, d->rows))
            throw f.fail(where + "(offset " + std::to_string(r.offset) + ", count " + std::to_string(r.count) +
                         ") points past the end of " + d->path);
}

BlockMapRecord RecordDecoder::decode_blockmap(const unsigned char* bytes, hsize_t row) const {
    check_blockmap(bytes, row);
    BlockMapRecord b;
    s::BlockMapSpan r;
    s::get_row<s::BlockMapTable>(bytes, b, r);
    b.absmax = f.read_range<float>(f.block_absmax, r.offset, r.count);
    b.scale_inv = f.read_range<float>(f.block_scale_inv, r.offset, r.count);
    b.sqnr_db = f.read_range<float>(f.block_sqnr, r.offset, r.count);
    return b;
}

}  // namespace fp8scope::trace
