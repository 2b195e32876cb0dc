#include "h5.h"

namespace fp8scope::h5 {

void Id::reset() {
    if (id_ < 0) return;
    switch (H5Iget_type(id_)) {
        case H5I_FILE: H5Fclose(id_); break;
        case H5I_GROUP: H5Gclose(id_); break;
        case H5I_DATASET: H5Dclose(id_); break;
        case H5I_DATASPACE: H5Sclose(id_); break;
        case H5I_DATATYPE: H5Tclose(id_); break;
        case H5I_ATTR: H5Aclose(id_); break;
        case H5I_GENPROP_LST: H5Pclose(id_); break;
        default: break;
    }
    id_ = H5I_INVALID_HID;
}

Id check(hid_t id, const std::string& what) {
    if (id < 0) throw Error(what);
    return Id(id);
}

namespace {
// The operating system's reason for a failed read or write ("No space left on device"),
// which HDF5 keeps only inside the description of the deepest entry of its error stack.
herr_t find_system_error(unsigned, const H5E_error2_t* e, void* out) {
    const std::string desc = e->desc ? e->desc : "";
    const std::string key = "error message = '";
    const auto at = desc.find(key);
    if (at == std::string::npos) return 0;
    const auto end = desc.find('\'', at + key.size());
    *static_cast<std::string*>(out) = desc.substr(at + key.size(), end - at - key.size());
    return 1;  // stop the walk
}
}  // namespace

void check(herr_t status, const std::string& what) {
    if (status >= 0) return;
    std::string reason;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, find_system_error, &reason);
    throw Error(reason.empty() ? what : what + ": " + reason);
}

Id bfloat16_type() {
    Id t = check(H5Tcopy(H5T_IEEE_F32LE), "H5Tcopy");
    // Sign at bit 15, exponent at 7 (8 bits), mantissa at 0 (7 bits), bias 127.
    check(H5Tset_fields(t, 15, 7, 8, 0, 7), "bfloat16 fields");
    check(H5Tset_precision(t, 16), "bfloat16 precision");
    check(H5Tset_size(t, 2), "bfloat16 size");
    check(H5Tset_ebias(t, 127), "bfloat16 bias");
    return t;
}

void quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {
// HDF5 closes what is still open when the process exits; a file whose close failed (a
// full disk) makes that crash in HDF5 1.10. Every file here is closed by its owner.
[[maybe_unused]] const herr_t kNoCloseAtExit = H5dont_atexit();
}  // namespace

}  // namespace fp8scope::h5
