// Compound types of field-list layouts (h5_columns.h).
#include "h5_columns.h"

namespace fp8scope::h5 {

Id Layout::type(const std::vector<bool>& keep) const {
    Id t = check(H5Tcreate(H5T_COMPOUND, size), "H5Tcreate compound");
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (!keep.empty() && !keep[i]) continue;
        const Column& c = columns[i];
        Id member;
        if (c.native) {
            member = check(H5Tcopy(c.native()), "H5Tcopy " + c.name);
        } else {
            member = check(H5Tcopy(H5T_C_S1), "H5Tcopy string");
            check(H5Tset_size(member, c.size), "H5Tset_size " + c.name);
            check(H5Tset_strpad(member, c.pad), "H5Tset_strpad " + c.name);
        }
        check(H5Tinsert(t, c.name.c_str(), c.offset, member), "H5Tinsert " + c.name);
    }
    return t;
}

Layout Layout::as_of(int format_version) const {
    Layout out = *this;
    for (Column& c : out.columns)
        if (format_version < c.renamed) c.name = c.before;
    return out;
}

}  // namespace fp8scope::h5
