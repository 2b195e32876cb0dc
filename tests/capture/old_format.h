// A trace today's writer wrote, turned into the layout of an older format version with
// the HDF5 C API, for the tests of the reader's older formats: format 4 renamed
// /meta/recipes (the quantizers) to /meta/quantizers and /meta/training_recipes to
// /meta/recipes, the quantizer id columns recipe_in_use and recipe to quantizer_in_use
// and quantizer, and /steps.step_time_s (seconds) to step_ms (milliseconds).
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <string>
#include <vector>

namespace fp8scope::trace::testing {

// Rewrites the compound dataset at `path` with its member `from` named `to`, the rows'
// bytes unchanged.
inline void rename_member(hid_t file, const char* path, const char* from, const char* to) {
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    ASSERT_GE(d, 0) << path;
    hid_t type = H5Dget_type(d), space = H5Dget_space(d), dcpl = H5Dget_create_plist(d);
    const hsize_t rows = static_cast<hsize_t>(H5Sget_simple_extent_npoints(space));
    std::vector<unsigned char> bytes(rows * H5Tget_size(type) + 1);
    ASSERT_GE(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0) << path;
    hid_t renamed = H5Tcreate(H5T_COMPOUND, H5Tget_size(type));
    bool found = false;
    for (int m = 0; m < H5Tget_nmembers(type); ++m) {
        char* name = H5Tget_member_name(type, unsigned(m));
        hid_t member = H5Tget_member_type(type, unsigned(m));
        found = found || std::strcmp(name, from) == 0;
        H5Tinsert(renamed, std::strcmp(name, from) == 0 ? to : name, H5Tget_member_offset(type, unsigned(m)), member);
        H5Tclose(member);
        H5free_memory(name);
    }
    EXPECT_TRUE(found) << path << " has no member " << from;
    H5Dclose(d);
    ASSERT_GE(H5Ldelete(file, path, H5P_DEFAULT), 0);
    const hsize_t maxdims = H5S_UNLIMITED;
    hid_t new_space = H5Screate_simple(1, &rows, &maxdims);
    hid_t nd = H5Dcreate2(file, path, renamed, new_space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(nd, 0) << path;
    if (rows) EXPECT_GE(H5Dwrite(nd, renamed, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0) << path;
    H5Dclose(nd);
    H5Sclose(new_space);
    H5Tclose(renamed);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(type);
}

// Divides every value of the double member `field` of `path` by `by`, in place.
inline void scale_member(hid_t file, const char* path, const char* field, double by) {
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    ASSERT_GE(d, 0) << path;
    hid_t space = H5Dget_space(d);
    std::vector<double> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)) + 1);
    hid_t mem = H5Tcreate(H5T_COMPOUND, sizeof(double));
    H5Tinsert(mem, field, 0, H5T_NATIVE_DOUBLE);
    EXPECT_GE(H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0) << path;
    for (double& x : v) x /= by;
    EXPECT_GE(H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0) << path;
    H5Tclose(mem);
    H5Sclose(space);
    H5Dclose(d);
}

// Gives the trace at `path` the names and units of the formats before 4, and the format
// version `version`.
inline void to_older_format(const std::string& path, std::int64_t version) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0) << path;
    EXPECT_GE(H5Lmove(f, "/meta/recipes", f, "/meta/training_recipes", H5P_DEFAULT, H5P_DEFAULT), 0);
    EXPECT_GE(H5Lmove(f, "/meta/quantizers", f, "/meta/recipes", H5P_DEFAULT, H5P_DEFAULT), 0);
    rename_member(f, "/steps", "step_ms", "step_time_s");
    scale_member(f, "/steps", "step_time_s", 1e3);
    rename_member(f, "/operands/table", "quantizer_in_use", "recipe_in_use");
    rename_member(f, "/operands/errors", "quantizer", "recipe");
    rename_member(f, "/blockmaps/table", "quantizer", "recipe");
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &version), 0);
    H5Aclose(a);
    H5Fclose(f);
}

// Rewrites the float or integer dataset at `path` as a format 4 writer stored it: no
// filters, floats in float32 (bfloat16 ones widened, exactly), the rows unchanged.
inline void unfilter(hid_t file, const char* path) {
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    ASSERT_GE(d, 0) << path;
    hid_t type = H5Dget_type(d), space = H5Dget_space(d), dcpl = H5Dget_create_plist(d);
    const bool is_float = H5Tget_class(type) == H5T_FLOAT;
    hid_t mem = is_float ? H5Tcopy(H5T_NATIVE_FLOAT) : H5Tcopy(type);
    const hsize_t rows = static_cast<hsize_t>(H5Sget_simple_extent_npoints(space));
    std::vector<unsigned char> bytes(rows * H5Tget_size(mem) + 1);
    ASSERT_GE(H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0) << path;
    H5Dclose(d);
    ASSERT_GE(H5Premove_filter(dcpl, H5Z_FILTER_ALL), 0) << path;
    ASSERT_GE(H5Ldelete(file, path, H5P_DEFAULT), 0);
    const hsize_t maxdims = H5S_UNLIMITED;
    hid_t new_space = H5Screate_simple(1, &rows, &maxdims);
    hid_t nd = H5Dcreate2(file, path, is_float ? H5T_IEEE_F32LE : type, new_space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(nd, 0) << path;
    if (rows) EXPECT_GE(H5Dwrite(nd, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0) << path;
    H5Dclose(nd);
    H5Sclose(new_space);
    H5Tclose(mem);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(type);
}

// Gives the trace at `path` the storage of format 4: every dataset uncompressed, channel
// absmax and the block maps in float32.
inline void to_format4(const std::string& path) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0) << path;
    for (const char* d : {"/operands/histogram", "/operands/channel_absmax", "/operands/amax_history",
                          "/operands/errors", "/operands/top", "/blockmaps/absmax", "/blockmaps/scale_inv",
                          "/blockmaps/sqnr_db", "/ops"})
        unfilter(f, d);
    const std::int64_t version = 4;
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &version), 0);
    H5Aclose(a);
    H5Fclose(f);
}

}  // namespace fp8scope::trace::testing
