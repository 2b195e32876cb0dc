// The analysis report reader: the layouts are the writer's (analysis_report_layout.h),
// matched to the file's members by name.
#include "analysis_report_reader.h"

#include <filesystem>

#include "analysis_report_layout.h"
#include "h5.h"

namespace fp8scope {
using trace::TraceError;
namespace {

constexpr std::size_t kMaxTensors = 1u << 20;
constexpr hsize_t kMaxElements = 1u << 28;  // channels or top values of one tensor

struct Reader {
    std::string path;
    TraceError fail(const std::string& problem) const { return TraceError(path, problem); }

    // A variable-length or fixed-length string attribute, or a 1-D list of them.
    std::vector<std::string> strings(hid_t obj, const char* name, const std::string& where) const {
        if (H5Aexists(obj, name) <= 0) throw fail(where + ": no attribute '" + name + "'");
        h5::Id attr(H5Aopen(obj, name, H5P_DEFAULT));
        h5::Id type(attr.valid() ? H5Aget_type(attr) : -1), space(attr.valid() ? H5Aget_space(attr) : -1);
        if (!type.valid() || !space.valid() || H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) <= 0)
            throw fail(where + ": attribute '" + std::string(name) + "' is not a string");
        const hssize_t n = H5Sget_simple_extent_npoints(space);
        if (n < 0 || static_cast<hsize_t>(n) > kMaxElements) throw fail(where + ": attribute '" + name + "' is malformed");
        std::vector<char*> ptrs(static_cast<std::size_t>(n), nullptr);
        h5::Id mem(H5Tcopy(type));
        if (n > 0 && H5Aread(attr, mem, ptrs.data()) < 0) throw fail(where + ": cannot read attribute '" + name + "'");
        std::vector<std::string> out;
        for (char* p : ptrs) {
            out.emplace_back(p ? p : "");
            H5free_memory(p);
        }
        return out;
    }
    std::string string(hid_t obj, const char* name, const std::string& where) const {
        auto v = strings(obj, name, where);
        if (v.size() != 1) throw fail(where + ": attribute '" + std::string(name) + "' is not one string");
        return v.front();
    }
    std::vector<std::int64_t> ints(hid_t obj, const char* name, const std::string& where) const {
        if (H5Aexists(obj, name) <= 0) throw fail(where + ": no attribute '" + name + "'");
        h5::Id attr(H5Aopen(obj, name, H5P_DEFAULT));
        h5::Id type(attr.valid() ? H5Aget_type(attr) : -1), space(attr.valid() ? H5Aget_space(attr) : -1);
        const hssize_t n = space.valid() ? H5Sget_simple_extent_npoints(space) : -1;
        if (!type.valid() || H5Tget_class(type) != H5T_INTEGER || n < 0 || static_cast<hsize_t>(n) > kMaxElements)
            throw fail(where + ": attribute '" + std::string(name) + "' is not an integer list");
        std::vector<std::int64_t> out(static_cast<std::size_t>(n));
        if (n > 0 && H5Aread(attr, H5T_NATIVE_INT64, out.data()) < 0)
            throw fail(where + ": cannot read attribute '" + name + "'");
        return out;
    }

    // A dataset read whole in `mem` type: its element count first (checked against `max`).
    h5::Id open(hid_t group, const char* name, const std::string& where, hsize_t& n, hsize_t max) const {
        if (H5Lexists(group, name, H5P_DEFAULT) <= 0) throw fail(where + ": no dataset '" + name + "'");
        h5::Id ds(H5Dopen2(group, name, H5P_DEFAULT));
        h5::Id space(ds.valid() ? H5Dget_space(ds) : -1);
        const hssize_t count = space.valid() ? H5Sget_simple_extent_npoints(space) : -1;
        if (count < 0 || static_cast<hsize_t>(count) > max)
            throw fail(where + "/" + name + ": unreadable or too large (" + std::to_string(count) + " elements)");
        n = static_cast<hsize_t>(count);
        return ds;
    }
    void read(hid_t ds, hid_t mem, void* out, hsize_t n, const std::string& what) const {
        if (n > 0 && H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) throw fail(what + ": cannot read (damaged?)");
    }
    // Rows of a compound dataset in `layout` (members matched by name).
    std::vector<unsigned char> rows(hid_t group, const char* name, const h5::Layout& layout, const std::string& where,
                                    hsize_t& n, hsize_t max) const {
        h5::Id ds = open(group, name, where, n, max);
        std::vector<unsigned char> out(n * layout.size);
        h5::Id type = layout.type();
        read(ds, type, out.data(), n, where + "/" + name);
        return out;
    }

    TensorAnalysis tensor(hid_t tensors, std::size_t index, std::size_t quantizers) const {
        const std::string name = std::to_string(index), where = "/tensors/" + name;
        if (H5Lexists(tensors, name.c_str(), H5P_DEFAULT) <= 0) throw fail("no group " + where);
        h5::Id g(H5Gopen2(tensors, name.c_str(), H5P_DEFAULT));
        if (!g.valid()) throw fail("cannot open " + where);
        TensorAnalysis t;
        t.file = string(g, "file", where);
        t.name = string(g, "name", where);
        t.dtype = string(g, "dtype", where);
        t.shape = ints(g, "shape", where);
        TensorStats& s = t.analysis.tensor;
        hsize_t n = 0;
        const auto stats = rows(g, "stats", analysis_layout::stats(), where, n, 1);
        if (n != 1) throw fail(where + "/stats: expected one record");
        h5::Get<h5::Packing::Aligned> get(stats.data());
        analysis_layout::stats_columns(get, s);

        h5::Id hist = open(g, "histogram", where, n, kHistBins);
        if (n != static_cast<hsize_t>(kHistBins) || ints(hist, "min_exponent", where + "/histogram") != std::vector<std::int64_t>{kHistMinExp})
            throw fail(where + "/histogram: expected " + std::to_string(kHistBins) + " bins from 2^" + std::to_string(kHistMinExp));
        read(hist, H5T_NATIVE_INT64, s.histogram.bins.data(), n, where + "/histogram");
        fields::visit_scalars(s.histogram, [&](std::string_view field, std::int64_t& count, const auto&...) {
            const auto v = ints(hist, std::string(field).c_str(), where + "/histogram");
            count = v.empty() ? 0 : v.front();
        });

        h5::Id channels = open(g, "channel_absmax", where, n, kMaxElements);
        s.outliers.channel_absmax.resize(n);
        read(channels, H5T_NATIVE_FLOAT, s.outliers.channel_absmax.data(), n, where + "/channel_absmax");

        const h5::Layout top_layout = analysis_layout::top();
        const auto top = rows(g, "top", top_layout, where, n, kMaxElements);
        s.outliers.top.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            h5::Get<h5::Packing::Aligned> row(top.data() + i * top_layout.size);
            fields::visit_scalars(s.outliers.top[i], row);
        }

        const h5::Layout error_layout = analysis_layout::error_figures();
        const auto errors = rows(g, "errors", error_layout, where, n, quantizers);
        if (n != quantizers)
            throw fail(where + "/errors: " + std::to_string(n) + " rows for " + std::to_string(quantizers) +
                       " quantizers");
        t.analysis.errors.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            h5::Get<h5::Packing::Aligned> row(errors.data() + i * error_layout.size);
            fields::visit_scalars(t.analysis.errors[i], row);
        }
        return t;
    }
};

h5::Id open_file(const std::string& path) {
    h5::quiet_errors();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec) || H5Fis_hdf5(path.c_str()) <= 0) return h5::Id();
    return h5::Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
}

}  // namespace

bool is_analysis_report(const std::string& path) {
    try {
        h5::Id file = open_file(path);
        return file.valid() && Reader{path}.string(file, "format", "/") == kAnalysisFormat;
    } catch (const std::exception&) {
        return false;
    }
}

AnalysisReport read_analysis_report(const std::string& path) {
    Reader r{path};
    h5::Id file = open_file(path);
    if (!file.valid()) throw r.fail("not a readable HDF5 file");
    try {
        if (r.string(file, "format", "/") != kAnalysisFormat) throw r.fail("not an fp8scope analysis report");
        const auto version = r.ints(file, "format_version", "/");
        if (version.size() != 1 || version[0] < 1) throw r.fail("malformed format_version");
        if (version[0] > kAnalysisFormatVersion)
            throw r.fail("format_version " + std::to_string(version[0]) + " is newer than this reader (reads up to " +
                         std::to_string(kAnalysisFormatVersion) + "); update fp8scope to open it");
        AnalysisReport out;
        out.tool_version = r.string(file, "tool_version", "/");
        // Version 1 called the quantizers recipes.
        out.quantizers = r.strings(file, version[0] < 2 ? "recipes" : "quantizers", "/");
        if (H5Lexists(file, "tensors", H5P_DEFAULT) <= 0) throw r.fail("no group /tensors");
        h5::Id tensors(H5Gopen2(file, "tensors", H5P_DEFAULT));
        H5G_info_t info{};
        if (!tensors.valid() || H5Gget_info(tensors, &info) < 0 || info.nlinks > kMaxTensors)
            throw r.fail("unreadable group /tensors");
        for (std::size_t i = 0; i < info.nlinks; ++i) {
            out.tensors.push_back(r.tensor(tensors, i, out.quantizers.size()));
            for (std::size_t k = 0; k < out.quantizers.size(); ++k)
                out.tensors.back().analysis.errors[k].recipe = out.quantizers[k];
        }
        return out;
    } catch (const h5::Error& e) {
        throw r.fail(e.what());
    }
}

}  // namespace fp8scope
