// HDF5 access of the trace reader: opens a trace file (SWMR read access, plain read-only
// for files that are not SWMR-capable, so foreign files get a clear answer), checks the
// format attributes and the type and shape of every dataset, and reads rows. Every range
// it reads is checked against the dataset's extent first: a damaged file raises
// TraceError, never reads out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "h5.h"
#include "trace_records.h"
#include "trace_schema.h"

namespace fp8scope::trace {

// One dataset of the file, opened and checked.
struct Dataset {
    const char* path = nullptr;
    h5::Id dset;
    h5::Id memtype;
    hsize_t rows = 0;
    hsize_t cols = 0;        // 0: 1-D
    std::size_t row_bytes = 0;  // in the file
    hsize_t chunk_bytes = 0;    // HDF5 allocates a whole chunk to read any row of it
    bool deflated = false;      // since format 5: chunks are shuffled and deflated
    bool bfloat16 = false;      // since format 5: floats stored as bfloat16, widened by read_rows
    h5::Layout layout;          // a compound table's columns (trace_schema.h)
    std::vector<std::size_t> absent;  // columns an older file lacks: they read as defaults
};

inline bool in_bounds(std::uint64_t offset, std::uint64_t count, hsize_t rows) {
    return count <= rows && offset <= rows - count;
}

// The datasets of one open trace file. Used by one thread at a time.
struct TraceFile {
    std::string path;
    h5::Id handle;
    h5::Id dxpl;  // small conversion buffers: most reads are a few rows
    int format_version = 0;  // of the file: a column added later reads as its default

    Dataset runs, linears, quantizers, training_recipes, op_names;
    Dataset steps, events, scaling_index, scaling_amax, scaling_scale;
    Dataset operands, errors, histogram, channel_absmax, top, amax_history;
    Dataset blockmaps, block_absmax, block_scale_inv, block_sqnr;
    Dataset ops;
    Dataset kernel_steps;  // since format 6; older files' sums are made from ops (kernel_steps.h)
    Dataset ranks;  // absent (no dataset) in files without rank records
    Dataset gate_up;      // /gate_up_alignment, since format 7 (older files: none)
    Dataset gemm_errors;  // absent in files from before output errors were recorded
    Dataset precision;  // absent in files from before the runs' precision plans were recorded
    Dataset injections;  // absent in files from before outlier injections were recorded
    hsize_t slots = 0;
    h5::Layout key_layout;  // the key columns of operand and block-map rows
    h5::Id key_type;

    // Flat data of many operand rows read in one go (operands() of a step): decoding a row
    // copies its spans from here instead of reading each one, which costs HDF5 more per
    // call than per byte. Set for the span of one call (a reader is used by one thread).
    struct Block {
        const Dataset* d = nullptr;
        hsize_t start = 0, count = 0;
        std::size_t elem = 0;
        std::vector<unsigned char> bytes;
    };
    mutable const std::vector<Block>* blocks = nullptr;

    TraceError fail(const std::string& problem) const { return TraceError(path, problem); }

    // Opens the file, checks its format, reads the root attributes and the /meta tables
    // into `meta`, and opens every dataset.
    void open(TraceMeta& meta);
    // Tables first, then the data they point into: the writer flushes in the opposite
    // order, so every row seen after this has its data visible too.
    void refresh();

    bool read_string_attr(const char* name, std::string& out);
    bool read_int_attr(const char* name, std::int64_t& out);
    // The root attributes, from TraceMeta's field list as the writer wrote them (its vectors
    // are the /meta tables). One that a file lacks keeps its field's default: an older
    // file is rank 0 of 1.
    void read_meta_attrs(TraceMeta& meta);

    // Opens a table and checks that its type holds every column of its layout (same type
    // class). A column added after the file's format version is allowed to be missing:
    // it reads as the default of its field; one renamed since is read under its old name.
    template <class Table>
    Dataset open_table(const char* p) {
        h5::Layout layout = schema::layout<Table>().as_of(format_version);
        Dataset d = open_ds(p, layout.type(), 0, &layout);
        d.layout = std::move(layout);
        return d;
    }

    // Opens a dataset and checks that its type holds every field the reader needs (same
    // type class) and that its shape is (rows) or (rows, cols).
    Dataset open_ds(const char* p, h5::Id memtype, hsize_t cols = 0, const h5::Layout* layout = nullptr);
    bool group_and_link_exist(const char* p);
    void read_extent(Dataset& d);

    void read_rows(const Dataset& d, hsize_t start, hsize_t count, void* buf, hid_t memtype = -1) const;

    template <class T>
    std::vector<T> read_range(const Dataset& d, hsize_t start, hsize_t count) const {
        std::vector<T> v(count);
        read_rows(d, start, count, v.data());
        return v;
    }

    // Rows of a compound table in its layout. Columns the file lacks get their defaults.
    std::vector<unsigned char> read_table(const Dataset& d, hsize_t start, hsize_t count) const;
    // Rows at arbitrary positions, in one read (a point selection keeps the given order).
    std::vector<unsigned char> read_table_at(const Dataset& d, const std::vector<hsize_t>& rows) const;
    void fill_absent(const Dataset& d, std::vector<unsigned char>& rows) const;

    // The records of a one-record table (trace_schema.h's RecordTable, NamesTable).
    template <class Table, class R = std::tuple_element_t<0, typename Table::Objects>>
    std::vector<R> read_records(const Dataset& d, hsize_t start, hsize_t count) const {
        const auto rows = read_table(d, start, count);
        std::vector<R> out(count);
        for (std::size_t i = 0; i < out.size(); ++i) schema::get_row<Table>(rows.data() + i * d.layout.size, out[i]);
        return out;
    }

    // The keys of operand or block-map rows, read without the rest of the row.
    std::vector<OperandKey> read_keys(const Dataset& d, hsize_t start, hsize_t count) const;
    static OperandKey key_at(const unsigned char* row) {
        OperandKey k;
        schema::get_row<schema::KeyTable>(row, k);
        return k;
    }
};

}  // namespace fp8scope::trace
