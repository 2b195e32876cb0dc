// Record decoding of the trace reader: an operand or block-map row of the file, with the
// spans it points to in the flat datasets, back into its record. Every span and id of
// the row is checked before it is read.
#pragma once

#include <cstdint>
#include <vector>

#include "reader_file.h"

namespace fp8scope::trace {

struct RecordDecoder {
    const TraceFile& f;
    const TraceMeta& meta;

    OperandRecord decode_operand(const unsigned char* bytes, hsize_t row) const;
    BlockMapRecord decode_blockmap(const unsigned char* bytes, hsize_t row) const;
    // Throws TraceError when a block-map row's quantizer, grid or span is damaged. Run when
    // the row is indexed, so every reader (inspect, export, the GUI) gives one verdict on a
    // file, whether or not it reads the maps.
    void check_blockmap(const unsigned char* bytes, hsize_t row) const;
    // The error figures of an operand row, one per recipe; with the recipes' names when
    // `names`.
    std::vector<ErrorStats> read_errors(const schema::OperandSpans& r, hsize_t row, bool names) const;
    void check_quantizer_in_use(std::int32_t quantizer_in_use, hsize_t row) const;
    // Reads, for each flat dataset, the range that the spans of `rows` (operand rows in
    // the table's layout) cover, when the spans lie close together (one step's operands
    // were written together). Spans out of bounds are left to decode_operand to report.
    std::vector<TraceFile::Block> read_blocks(const std::vector<unsigned char>& rows, std::size_t n) const;

private:
    void check_span(const Dataset& d, std::uint64_t offset, std::uint64_t count, const char* field,
                    hsize_t row) const;
};

}  // namespace fp8scope::trace
