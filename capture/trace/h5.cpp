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

void check(herr_t status, const std::string& what) {
    if (status < 0) throw Error(what);
}

void quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

}  // namespace fp8scope::h5
