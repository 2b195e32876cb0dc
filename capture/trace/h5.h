// Small RAII layer over the HDF5 C API: owned ids, and errors turned into exceptions
// that name the file and the object, instead of HDF5's stack dump on stderr.
#pragma once

#include <hdf5.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace fp8scope::h5 {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Owns one HDF5 id and closes it with the matching H5*close.
class Id {
public:
    Id() = default;
    explicit Id(hid_t id) : id_(id) {}
    Id(Id&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
    Id& operator=(Id&& o) noexcept {
        if (this != &o) {
            reset();
            id_ = std::exchange(o.id_, H5I_INVALID_HID);
        }
        return *this;
    }
    Id(const Id&) = delete;
    Id& operator=(const Id&) = delete;
    ~Id() { reset(); }

    hid_t get() const { return id_; }
    operator hid_t() const { return id_; }
    bool valid() const { return id_ >= 0; }
    void reset();

private:
    hid_t id_ = H5I_INVALID_HID;
};

// Throws Error(what) when `id` is negative; otherwise takes ownership.
Id check(hid_t id, const std::string& what);
// Throws Error(what) when an herr_t is negative.
void check(herr_t status, const std::string& what);

// bfloat16 as an HDF5 float type: float32's sign and 8-bit exponent with a 7-bit mantissa
// (the upper half of a float32). HDF5 converts it to and from float (rounding to nearest);
// h5py reads it as float32.
Id bfloat16_type();

// Silences HDF5's automatic error printing for the life of the process: errors reach
// users as exceptions with context instead.
void quiet_errors();

}  // namespace fp8scope::h5
