// One field of one row of a compound table, rewritten in place with the HDF5 C API: the
// smallest damage that reaches a given check of the trace reader (a field a hostile
// file sets to an extreme value while everything else stays valid).
#pragma once

#include <hdf5.h>

#include <string>

namespace fp8scope::trace::testing {

// False when the file, dataset, field or row is not there.
template <class T>
bool patch_field(const std::string& file, const char* dataset, const char* field, hsize_t row, T value,
                 hid_t native_type) {
    bool ok = false;
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, dataset, H5P_DEFAULT) : -1;
    if (d >= 0) {
        hid_t mem = H5Tcreate(H5T_COMPOUND, sizeof(T));
        H5Tinsert(mem, field, 0, native_type);
        hid_t space = H5Dget_space(d);
        hsize_t start = row, count = 1;
        hid_t one = H5Screate_simple(1, &count, nullptr);
        ok = H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &count, nullptr) >= 0 &&
             H5Dwrite(d, mem, one, space, H5P_DEFAULT, &value) >= 0;
        H5Sclose(one);
        H5Sclose(space);
        H5Tclose(mem);
        H5Dclose(d);
    }
    if (f >= 0) H5Fclose(f);
    return ok;
}

}  // namespace fp8scope::trace::testing
