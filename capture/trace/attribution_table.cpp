// /meta/attribution, written into and read from a closed trace.
#include "attribution_table.h"

#include "h5.h"
#include "trace_schema.h"

namespace fp8scope::trace {

using Table = schema::RecordTable<AttributionRecord>;

void write_attribution_table(const std::string& path, const std::vector<AttributionRecord>& rows) {
    h5::quiet_errors();
    const std::string what = path + ": " + kAttribution;
    h5::Id file = h5::check(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), what + ": cannot open the trace");
    const h5::Layout layout = schema::layout<Table>();
    std::vector<unsigned char> buf(layout.size * rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) schema::put_row<Table>(buf.data() + i * layout.size, rows[i]);
    const hsize_t dims[1] = {rows.size()};
    h5::Id space = h5::check(H5Screate_simple(1, dims, nullptr), what);
    h5::Id type = layout.type();
    h5::Id ds = h5::check(H5Dcreate2(file, kAttribution, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                          what + ": cannot create");
    if (!rows.empty()) h5::check(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), what + ": cannot write");
}

std::vector<AttributionRecord> read_attribution_table(const std::string& path) {
    h5::quiet_errors();
    const std::string what = path + ": " + kAttribution;
    h5::Id file = h5::check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), what + ": cannot open the trace");
    if (H5Lexists(file, kAttribution, H5P_DEFAULT) <= 0) return {};
    h5::Id ds = h5::check(H5Dopen2(file, kAttribution, H5P_DEFAULT), what);
    h5::Id space = h5::check(H5Dget_space(ds), what);
    hsize_t rows = 0;
    H5Sget_simple_extent_dims(space, &rows, nullptr);
    const h5::Layout layout = schema::layout<Table>();
    std::vector<unsigned char> buf(layout.size * rows);
    h5::Id type = layout.type();
    if (rows > 0) h5::check(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), what + ": cannot read");
    std::vector<AttributionRecord> out(rows);
    for (std::size_t i = 0; i < out.size(); ++i) schema::get_row<Table>(buf.data() + i * layout.size, out[i]);
    return out;
}

}  // namespace fp8scope::trace
