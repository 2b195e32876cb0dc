// Compound types of the trace tables (trace_schema.h). Member names are the schema's
// column names: h5py shows them as the fields of a structured array.
#include "trace_schema.h"

#include <cstddef>

namespace fp8scope::trace::schema {
namespace {

h5::Id compound(std::size_t size) {
    return h5::check(H5Tcreate(H5T_COMPOUND, size), "H5Tcreate compound");
}
void add(const h5::Id& t, const char* name, std::size_t offset, hid_t type) {
    h5::check(H5Tinsert(t, name, offset, type), std::string("H5Tinsert ") + name);
}
h5::Id fixed_string(std::size_t n) {
    h5::Id t = h5::check(H5Tcopy(H5T_C_S1), "H5Tcopy string");
    h5::check(H5Tset_size(t, n), "H5Tset_size");
    h5::check(H5Tset_strpad(t, H5T_STR_NULLPAD), "H5Tset_strpad");
    return t;
}

}  // namespace

#define FIELD(T, m, type) add(t, #m, offsetof(T, m), type)
#define STRFIELD(T, m) FIELD(T, m, fixed_string(sizeof(T::m)))

h5::Id run_type() {
    h5::Id t = compound(sizeof(RunRow));
    STRFIELD(RunRow, name);
    STRFIELD(RunRow, recipe);
    return t;
}

h5::Id linear_type() {
    h5::Id t = compound(sizeof(LinearRow));
    STRFIELD(LinearRow, name);
    FIELD(LinearRow, layer, H5T_NATIVE_INT32);
    FIELD(LinearRow, in_features, H5T_NATIVE_INT64);
    FIELD(LinearRow, out_features, H5T_NATIVE_INT64);
    return t;
}

h5::Id name_type() {
    h5::Id t = compound(sizeof(NameRow));
    STRFIELD(NameRow, name);
    return t;
}

h5::Id step_type() {
    h5::Id t = compound(sizeof(StepRow));
    FIELD(StepRow, run, H5T_NATIVE_INT32);
    FIELD(StepRow, step, H5T_NATIVE_INT64);
    FIELD(StepRow, loss, H5T_NATIVE_DOUBLE);
    FIELD(StepRow, eval_loss, H5T_NATIVE_DOUBLE);
    FIELD(StepRow, lr, H5T_NATIVE_DOUBLE);
    FIELD(StepRow, grad_norm, H5T_NATIVE_DOUBLE);
    FIELD(StepRow, step_time_s, H5T_NATIVE_DOUBLE);
    FIELD(StepRow, tokens_per_s, H5T_NATIVE_DOUBLE);
    FIELD(StepRow, recipe, H5T_NATIVE_INT32);
    return t;
}

h5::Id event_type() {
    h5::Id t = compound(sizeof(EventRow));
    FIELD(EventRow, run, H5T_NATIVE_INT32);
    FIELD(EventRow, step, H5T_NATIVE_INT64);
    FIELD(EventRow, kind, H5T_NATIVE_INT32);
    STRFIELD(EventRow, detail);
    return t;
}

h5::Id scaling_index_type() {
    h5::Id t = compound(sizeof(ScalingIndexRow));
    FIELD(ScalingIndexRow, run, H5T_NATIVE_INT32);
    FIELD(ScalingIndexRow, step, H5T_NATIVE_INT64);
    return t;
}

h5::Id operand_type() {
    h5::Id t = compound(sizeof(OperandRow));
    FIELD(OperandRow, run, H5T_NATIVE_INT32);
    FIELD(OperandRow, step, H5T_NATIVE_INT64);
    FIELD(OperandRow, linear, H5T_NATIVE_INT32);
    FIELD(OperandRow, gemm, H5T_NATIVE_INT8);
    FIELD(OperandRow, operand, H5T_NATIVE_INT8);
    FIELD(OperandRow, recipe_in_use, H5T_NATIVE_INT32);
    FIELD(OperandRow, scale, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, numel, H5T_NATIVE_INT64);
    FIELD(OperandRow, finite, H5T_NATIVE_INT64);
    FIELD(OperandRow, nan, H5T_NATIVE_INT64);
    FIELD(OperandRow, inf, H5T_NATIVE_INT64);
    FIELD(OperandRow, zero, H5T_NATIVE_INT64);
    FIELD(OperandRow, amax, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, min_nonzero_abs, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, mean, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, rms, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, stddev, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, dynamic_range, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, kurtosis, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, outlier_k, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, frac_beyond_k_rms, H5T_NATIVE_DOUBLE);
    FIELD(OperandRow, hist_zero, H5T_NATIVE_INT64);
    FIELD(OperandRow, hist_nan, H5T_NATIVE_INT64);
    FIELD(OperandRow, hist_inf, H5T_NATIVE_INT64);
    FIELD(OperandRow, hist_min_exp, H5T_NATIVE_INT32);
    FIELD(OperandRow, hist_offset, H5T_NATIVE_UINT64);
    FIELD(OperandRow, hist_count, H5T_NATIVE_UINT64);
    FIELD(OperandRow, errors_offset, H5T_NATIVE_UINT64);
    FIELD(OperandRow, errors_count, H5T_NATIVE_UINT64);
    FIELD(OperandRow, channel_offset, H5T_NATIVE_UINT64);
    FIELD(OperandRow, channel_count, H5T_NATIVE_UINT64);
    FIELD(OperandRow, top_offset, H5T_NATIVE_UINT64);
    FIELD(OperandRow, top_count, H5T_NATIVE_UINT64);
    FIELD(OperandRow, history_offset, H5T_NATIVE_UINT64);
    FIELD(OperandRow, history_count, H5T_NATIVE_UINT64);
    return t;
}

h5::Id error_type() {
    h5::Id t = compound(sizeof(ErrorRow));
    FIELD(ErrorRow, recipe, H5T_NATIVE_INT32);
    FIELD(ErrorRow, amax, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, mse, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, sqnr_db, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, rel_l2, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, max_abs_err, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, cosine, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, underflow_pct, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, overflow_pct, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, scale_inv_min, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, scale_inv_max, H5T_NATIVE_DOUBLE);
    FIELD(ErrorRow, nonfinite_out, H5T_NATIVE_INT64);
    return t;
}

h5::Id top_type() {
    h5::Id t = compound(sizeof(TopRow));
    FIELD(TopRow, value, H5T_NATIVE_FLOAT);
    FIELD(TopRow, row, H5T_NATIVE_INT64);
    FIELD(TopRow, col, H5T_NATIVE_INT64);
    return t;
}

h5::Id blockmap_type() {
    h5::Id t = compound(sizeof(BlockMapRow));
    FIELD(BlockMapRow, run, H5T_NATIVE_INT32);
    FIELD(BlockMapRow, step, H5T_NATIVE_INT64);
    FIELD(BlockMapRow, linear, H5T_NATIVE_INT32);
    FIELD(BlockMapRow, gemm, H5T_NATIVE_INT8);
    FIELD(BlockMapRow, operand, H5T_NATIVE_INT8);
    FIELD(BlockMapRow, recipe, H5T_NATIVE_INT32);
    FIELD(BlockMapRow, rows, H5T_NATIVE_INT64);
    FIELD(BlockMapRow, cols, H5T_NATIVE_INT64);
    FIELD(BlockMapRow, tile_rows, H5T_NATIVE_INT32);
    FIELD(BlockMapRow, tile_cols, H5T_NATIVE_INT32);
    FIELD(BlockMapRow, grid_rows, H5T_NATIVE_INT32);
    FIELD(BlockMapRow, grid_cols, H5T_NATIVE_INT32);
    FIELD(BlockMapRow, offset, H5T_NATIVE_UINT64);
    FIELD(BlockMapRow, count, H5T_NATIVE_UINT64);
    return t;
}

h5::Id op_type() {
    h5::Id t = compound(sizeof(OpRow));
    FIELD(OpRow, run, H5T_NATIVE_INT32);
    FIELD(OpRow, step, H5T_NATIVE_INT64);
    FIELD(OpRow, op, H5T_NATIVE_INT32);
    FIELD(OpRow, linear, H5T_NATIVE_INT32);
    FIELD(OpRow, layer, H5T_NATIVE_INT32);
    FIELD(OpRow, device, H5T_NATIVE_INT32);
    FIELD(OpRow, stream, H5T_NATIVE_INT32);
    FIELD(OpRow, start_ns, H5T_NATIVE_INT64);
    FIELD(OpRow, end_ns, H5T_NATIVE_INT64);
    return t;
}

#undef STRFIELD
#undef FIELD

h5::Id packed(hid_t memtype) {
    h5::Id t = h5::check(H5Tcopy(memtype), "H5Tcopy");
    h5::check(H5Tpack(t), "H5Tpack");
    return t;
}

}  // namespace fp8scope::trace::schema
