// Compound types and rows from field lists (h5_columns.h): packed rows put every column
// right after the one before, aligned rows where a C struct has its members; Put and Get
// agree with the type, prefixes and flat names rename columns, and a layout carries the
// defaults a reader gives the columns an older file does not have.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "h5_columns.h"

namespace fp8scope::h5 {
namespace {

enum class Side : std::uint8_t { Left, Right };

struct Sample {
    std::int32_t id = -1;
    double value = 0.5;
    Side side = Side::Right;
    std::string name = "abc";
    float small = 2.0f;
    double added = -1.0;  // a column of a later format version
};
template <fields::Of<Sample> S, class V>
void visit_fields(S& s, V&& v) {
    v("id", s.id);
    v("value", s.value, fields::FlatName{"sample_value"});
    v("side", s.side);
    v("name", s.name, fields::MaxChars<6>{});
    v("small", s.small);
    v("added", s.added, fields::Since{2});
}

// What the aligned layout must equal.
struct CSample {
    std::int32_t id;
    double value;
    std::int8_t side;
    char name[6];
    float small;
    double added;
};

template <Packing P>
Layout sample_layout() {
    return make_layout<P>([](auto& v) {
        Sample s;
        fields::visit_scalars(s, v);
    });
}

TEST(H5Columns, PackedRowsFollowTheList) {
    const Layout l = sample_layout<Packing::Packed>();
    ASSERT_EQ(l.columns.size(), 6u);
    EXPECT_EQ(l.columns[1].name, "sample_value");
    EXPECT_EQ(l.columns[1].offset, 4u);
    EXPECT_EQ(l.columns[2].offset, 12u);
    EXPECT_EQ(l.columns[3].offset, 13u);
    EXPECT_EQ(l.columns[3].size, 6u);
    EXPECT_EQ(l.columns[5].since, 2);
    EXPECT_EQ(l.size, 4u + 8 + 1 + 6 + 4 + 8);
    Id t = l.type();
    EXPECT_EQ(H5Tget_size(t), l.size);
    EXPECT_EQ(H5Tget_member_class(t, 2), H5T_INTEGER);
    Id side(H5Tget_member_type(t, 2));
    EXPECT_GT(H5Tequal(side, H5T_NATIVE_INT8), 0);  // an enum of one byte: int8
    EXPECT_EQ(H5Tget_member_class(t, 3), H5T_STRING);
}

TEST(H5Columns, AlignedRowsAreLaidOutAsACStruct) {
    const Layout l = sample_layout<Packing::Aligned>();
    EXPECT_EQ(l.size, sizeof(CSample));
    EXPECT_EQ(l.columns[0].offset, offsetof(CSample, id));
    EXPECT_EQ(l.columns[1].offset, offsetof(CSample, value));
    EXPECT_EQ(l.columns[2].offset, offsetof(CSample, side));
    EXPECT_EQ(l.columns[3].offset, offsetof(CSample, name));
    EXPECT_EQ(l.columns[4].offset, offsetof(CSample, small));
    EXPECT_EQ(l.columns[5].offset, offsetof(CSample, added));
}

TEST(H5Columns, PutAndGetRoundTripAndCutLongStrings) {
    const Layout l = sample_layout<Packing::Packed>();
    Sample in{7, -3.25, Side::Left, "longer than six", 1.5f, 9.0};
    std::vector<unsigned char> row(l.size);
    Put<Packing::Packed> put(row.data());
    fields::visit_scalars(in, put);
    Sample out;
    Get<Packing::Packed> get(row.data());
    fields::visit_scalars(out, get);
    EXPECT_EQ(out.id, 7);
    EXPECT_EQ(out.value, -3.25);
    EXPECT_EQ(out.side, Side::Left);
    EXPECT_EQ(out.name, "longer");
    EXPECT_EQ(out.small, 1.5f);
    EXPECT_EQ(out.added, 9.0);

    // The defaults row holds a default Sample: what an older file's missing column reads as.
    Sample d{0, 0, Side::Left, "", 0, 0};
    Get<Packing::Packed> get_defaults(l.defaults.data());
    fields::visit_scalars(d, get_defaults);
    EXPECT_EQ(d.id, -1);
    EXPECT_EQ(d.added, -1.0);
    EXPECT_EQ(d.name, "abc");
}

TEST(H5Columns, PrefixesNameNestedColumns) {
    const Layout l = make_layout([](auto& v) {
        Sample s;
        fields::visit_scalars(s, with_prefix("hist_", v));
    });
    EXPECT_EQ(l.columns[0].name, "hist_id");
    EXPECT_EQ(l.columns[1].name, "hist_sample_value");
}

// A type with only some columns (those an older file has) keeps the full row's offsets.
TEST(H5Columns, ATypeOfSomeColumnsKeepsTheirOffsets) {
    const Layout l = sample_layout<Packing::Packed>();
    Id t = l.type({true, true, true, true, true, false});
    EXPECT_EQ(H5Tget_nmembers(t), 5);
    EXPECT_EQ(H5Tget_size(t), l.size);
    EXPECT_EQ(H5Tget_member_offset(t, 4), l.columns[4].offset);
}

}  // namespace
}  // namespace fp8scope::h5
