// Writes the HDF5 report of `fp8scope-engine analyze` (layout in analysis_report.h).
#include "analysis_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "analysis_report_layout.h"
#include "h5.h"

namespace fp8scope {
namespace {

h5::Id vlen_string_type() {
    h5::Id t = h5::check(H5Tcopy(H5T_C_S1), "string type");
    h5::check(H5Tset_size(t, H5T_VARIABLE), "string type");
    h5::check(H5Tset_cset(t, H5T_CSET_UTF8), "string type");
    return t;
}

void write_string_attr(hid_t obj, const char* name, const std::string& value) {
    h5::Id type = vlen_string_type();
    h5::Id space = h5::check(H5Screate(H5S_SCALAR), std::string("attribute ") + name);
    h5::Id attr = h5::check(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                            std::string("attribute ") + name);
    const char* p = value.c_str();
    h5::check(H5Awrite(attr, type, &p), std::string("attribute ") + name);
}

void write_strings_attr(hid_t obj, const char* name, const std::vector<std::string>& values) {
    h5::Id type = vlen_string_type();
    hsize_t n = values.size();
    h5::Id space = h5::check(H5Screate_simple(1, &n, nullptr), std::string("attribute ") + name);
    h5::Id attr = h5::check(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                            std::string("attribute ") + name);
    std::vector<const char*> ptrs;
    for (const auto& v : values) ptrs.push_back(v.c_str());
    if (n) h5::check(H5Awrite(attr, type, ptrs.data()), std::string("attribute ") + name);
}

void write_int64_attr(hid_t obj, const char* name, const std::vector<std::int64_t>& values,
                      bool scalar) {
    hsize_t n = values.size();
    h5::Id space = h5::check(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr),
                             std::string("attribute ") + name);
    h5::Id attr = h5::check(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT),
                            std::string("attribute ") + name);
    if (n) h5::check(H5Awrite(attr, H5T_NATIVE_INT64, values.data()), std::string("attribute ") + name);
}

// A 1-D dataset of `n` elements of `type`, memory layout `mem_type`.
void write_dataset(hid_t group, const char* name, hid_t file_type, hid_t mem_type, hsize_t n,
                   const void* data, bool scalar = false) {
    h5::Id space = h5::check(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr),
                             std::string("dataset ") + name);
    h5::Id ds = h5::check(H5Dcreate2(group, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                          std::string("dataset ") + name);
    if (scalar || n) h5::check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                               std::string("dataset ") + name);
}

void write_stats(hid_t group, const TensorStats& s) {
    const h5::Layout layout = analysis_layout::stats();
    std::vector<unsigned char> row(layout.size, 0);
    h5::Put<h5::Packing::Aligned> put(row.data());
    analysis_layout::stats_columns(put, s);
    h5::Id t = layout.type();
    write_dataset(group, "stats", t, t, 1, row.data(), /*scalar=*/true);
}

// The dense bins, with the exponent of bin 0 and the histogram's counts as attributes.
void write_histogram(hid_t group, const Log2Histogram& h) {
    write_dataset(group, "histogram", H5T_STD_I64LE, H5T_NATIVE_INT64, h.bins.size(), h.bins.data());
    h5::Id ds = h5::check(H5Dopen2(group, "histogram", H5P_DEFAULT), "dataset histogram");
    write_int64_attr(ds, "min_exponent", {kHistMinExp}, true);
    fields::visit_scalars(h, [&](std::string_view name, std::int64_t count, const auto&...) {
        write_int64_attr(ds, std::string(name).c_str(), {count}, true);
    });
}

void write_top(hid_t group, const std::vector<TopValue>& top) {
    const h5::Layout layout = analysis_layout::top();
    std::vector<unsigned char> rows(layout.size * top.size(), 0);
    for (std::size_t i = 0; i < top.size(); ++i) {
        h5::Put<h5::Packing::Aligned> put(rows.data() + i * layout.size);
        fields::visit_scalars(top[i], put);
    }
    h5::Id t = layout.type();
    write_dataset(group, "top", t, t, top.size(), rows.data());
}

// One row per quantizer: its name, a fixed-length string sized to the longest name, then the
// numbers of ErrorStats.
void write_errors(hid_t group, const std::vector<ErrorStats>& errors) {
    std::size_t name_size = 1;
    for (const auto& e : errors) name_size = std::max(name_size, e.recipe.size() + 1);
    h5::LayoutBuilder<h5::Packing::Aligned> builder;
    builder.string("quantizer", name_size, H5T_STR_NULLTERM);
    const ErrorStats defaults;
    fields::visit_scalars(defaults, builder);  // the name has no width: not a column again
    const h5::Layout layout = std::move(builder).finish();

    std::vector<unsigned char> buf(layout.size * errors.size(), 0);
    for (std::size_t i = 0; i < errors.size(); ++i) {
        const auto& e = errors[i];
        unsigned char* row = buf.data() + i * layout.size;
        std::memcpy(row, e.recipe.data(), e.recipe.size());
        h5::Put<h5::Packing::Aligned> put(row);
        put.skip(name_size);
        fields::visit_scalars(e, put);
    }
    h5::Id t = layout.type();
    write_dataset(group, "errors", t, t, errors.size(), buf.data());
}

void write_tensor(hid_t tensors, std::size_t index, const TensorAnalysis& ta) {
    const std::string gname = std::to_string(index);
    h5::Id g = h5::check(H5Gcreate2(tensors, gname.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                         "group /tensors/" + gname);
    write_string_attr(g, "file", ta.file);
    write_string_attr(g, "name", ta.name);
    write_string_attr(g, "dtype", ta.dtype);
    write_int64_attr(g, "shape", ta.shape, false);
    const TensorStats& s = ta.analysis.tensor;
    write_stats(g, s);
    write_histogram(g, s.histogram);
    write_dataset(g, "channel_absmax", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, s.outliers.channel_absmax.size(),
                  s.outliers.channel_absmax.data());
    write_top(g, s.outliers.top);
    write_errors(g, ta.analysis.errors);
}

void write_file(const std::string& path, const std::string& tool_version,
                const std::vector<std::string>& quantizers, const std::vector<TensorAnalysis>& tensors) {
    h5::Id file = h5::check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create file");
    write_string_attr(file, "format", kAnalysisFormat);
    write_int64_attr(file, "format_version", {kAnalysisFormatVersion}, true);
    write_string_attr(file, "tool_version", tool_version);
    write_strings_attr(file, "quantizers", quantizers);
    h5::Id group = h5::check(H5Gcreate2(file, "tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "group /tensors");
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        try {
            write_tensor(group, i, tensors[i]);
        } catch (const h5::Error& e) {
            throw h5::Error(std::string(e.what()) + " of /tensors/" + std::to_string(i) + " ('" +
                            tensors[i].name + "')");
        }
    }
    h5::check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush");
}

}  // namespace

void write_analysis_report(const std::string& path, const std::string& tool_version,
                           const std::vector<std::string>& quantizers,
                           const std::vector<TensorAnalysis>& tensors) {
    h5::quiet_errors();
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    try {
        write_file(tmp, tool_version, quantizers, tensors);
    } catch (const h5::Error& e) {
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        throw std::runtime_error(path + ": cannot write HDF5 report: " + e.what());
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        const std::string why = ec.message();
        std::filesystem::remove(tmp, ec);
        throw std::runtime_error(path + ": cannot write HDF5 report: rename failed: " + why);
    }
}

}  // namespace fp8scope
