// Indexing a trace's rows (reader_index.h).
#include "reader_index.h"

#include "reader_decode.h"
#include "reader_overview.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace fp8scope::trace {
namespace s = schema;

namespace {

constexpr hsize_t kIndexChunk = 1u << 16;  // rows per read while indexing

void check_run(const TraceFile& f, const TraceMeta& meta, std::int32_t run, const char* table, hsize_t row) {
    if (run < 0 || run >= static_cast<int>(meta.runs.size()))
        throw f.fail(std::string(table) + " row " + std::to_string(row) + ": run " + std::to_string(run) +
                     " is not in /meta/runs");
}

int check_key(const TraceFile& f, const TraceMeta& meta, const OperandKey& k, const char* table, hsize_t row) {
    check_run(f, meta, k.run, table, row);
    // Stored as int8: a negative value reads back as a large one.
    const int gemm = static_cast<std::int8_t>(k.gemm), operand = static_cast<std::int8_t>(k.operand);
    if (k.linear < 0 || k.linear >= static_cast<int>(meta.linears.size()) || gemm < 0 || gemm > 2 ||
        operand < 0 || operand > 2)
        throw f.fail(std::string(table) + " row " + std::to_string(row) + ": linear/gemm/operand " +
                     std::to_string(k.linear) + "/" + std::to_string(gemm) + "/" + std::to_string(operand) +
                     " out of range");
    int slot = operand_slot(k.linear, k.gemm, k.operand);
    if (slot < 0)
        throw f.fail(std::string(table) + " row " + std::to_string(row) + ": operand " +
                     std::to_string(operand) + " does not belong to gemm " + std::to_string(gemm));
    return slot;
}

// Puts (step, row) pairs appended from `tail` on into step order, once per update()
// (a rewind makes steps go back): the stable sort and merge keep rows of one step in
// file order, so the later row of a re-recorded step comes last. One O(n log n) pass
// per batch of new rows, not one per row.
std::int64_t step_of(const std::pair<std::int64_t, hsize_t>& e) { return e.first; }
std::int64_t step_of(const TraceIndex::OpRows& e) { return e.step; }

template <class Entry>
void merge_tail(std::vector<Entry>& v, std::size_t tail) {
    const auto by_step = [](const Entry& a, const Entry& b) { return step_of(a) < step_of(b); };
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(tail);
    if (!std::is_sorted(mid, v.end(), by_step)) std::stable_sort(mid, v.end(), by_step);
    if (mid != v.begin() && mid != v.end() && by_step(*mid, *(mid - 1))) std::inplace_merge(v.begin(), mid, v.end(), by_step);
}

// Calls f(first row, count) over [from, to) in pieces, so that indexing a large table
// holds one piece of it at a time, not all of it.
template <class F>
void in_chunks(hsize_t from, hsize_t to, F&& f) {
    for (hsize_t at = from; at < to;) {
        const hsize_t n = std::min<hsize_t>(to - at, kIndexChunk);
        f(at, n);
        at += n;
    }
}

// The first row of `d` from which on the rows lie at steps >= from: found by reading blocks
// from the end back until one whose steps all lie before `from`. `records(at, n)` reads
// rows that have a step.
template <class Read>
hsize_t tail_row(const Dataset& d, std::int64_t from, Read records) {
    for (hsize_t end = d.rows; end > 0;) {
        const hsize_t n = std::min<hsize_t>(end, kIndexChunk / 16);
        std::int64_t most = INT64_MIN;
        for (const auto& r : records(end - n, n)) most = std::max<std::int64_t>(most, r.step);
        if (most < from) return end;
        end -= n;
    }
    return 0;
}

}  // namespace

void check_op_row(const TraceFile& f, const TraceMeta& meta, const OpRecord& r, hsize_t row) {
    check_run(f, meta, r.run, s::kOpTimes, row);
    const auto ops = static_cast<std::int64_t>(meta.ops.size());
    if (r.op < 0 || r.op >= ops || r.parent < -1 || r.parent >= ops)
        throw f.fail(std::string(s::kOpTimes) + " row " + std::to_string(row) + ": op " + std::to_string(r.op) +
                     " (parent " + std::to_string(r.parent) + ") is not in /meta/ops");
}

void TraceIndex::start_at(const TraceFile& f, std::int64_t from) {
    const auto table = [&f]<class Table>(const Dataset& d, Table) {
        return [&f, &d](hsize_t at, hsize_t n) { return f.read_records<Table>(d, at, n); };
    };
    indexed_steps = tail_row(f.steps, from, table(f.steps, s::StepTable{}));
    indexed_scaling = tail_row(f.scaling_index, from, table(f.scaling_index, s::ScalingIndexTable{}));
    indexed_ops = tail_row(f.ops, from, table(f.ops, s::OpTable{}));
    indexed_kernel_steps = tail_row(f.kernel_steps, from, table(f.kernel_steps, s::KernelStepTable{}));
    indexed_ranks = tail_row(f.ranks, from, table(f.ranks, s::RankTable{}));
}

bool TraceIndex::update(const TraceFile& f, TraceMeta& meta) {
    bool grew = false;
    // Op names first: op rows refer to them.
    if (f.op_names.rows > meta.ops.size()) {
        for (auto& name : f.read_records<s::NamesTable>(f.op_names, meta.ops.size(), f.op_names.rows - meta.ops.size()))
            meta.ops.push_back(std::move(name));
        grew = true;
    }
    if (f.steps.rows > indexed_steps) {
        auto rows = f.read_records<s::StepTable>(f.steps, indexed_steps, f.steps.rows - indexed_steps);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            check_step_record(f, meta, rows[i], indexed_steps + i);
            step_records.push_back(rows[i]);
        }
        indexed_steps = f.steps.rows;
        grew = true;
    }
    if (f.events.rows > indexed_events) {
        auto rows = f.read_records<s::EventTable>(f.events, indexed_events, f.events.rows - indexed_events);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            EventRecord& r = rows[i];
            if (r.run != -1) check_run(f, meta, r.run, s::kEvents, indexed_events + i);
            const int kind = static_cast<int>(r.kind);
            if (kind < 0 || kind > static_cast<int>(kLastEventKind))
                throw f.fail(std::string(s::kEvents) + " row " + std::to_string(indexed_events + i) +
                             ": unknown event kind " + std::to_string(kind));
            event_records.push_back(std::move(r));
        }
        indexed_events = f.events.rows;
        grew = true;
    }
    if (f.ranks.rows > indexed_ranks) {
        for (const auto& r : read_rank_rows(f, meta, indexed_ranks, f.ranks.rows - indexed_ranks)) rank_records.push_back(r);
        indexed_ranks = f.ranks.rows;
        grew = true;
    }
    if (f.gemm_errors.rows > indexed_gemm_errors) {
        auto rows = f.read_records<s::GemmErrorTable>(f.gemm_errors, indexed_gemm_errors,
                                                      f.gemm_errors.rows - indexed_gemm_errors);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const GemmErrorRecord& r = rows[i];
            const std::string at = std::string(s::kGemmErrors) + " row " + std::to_string(indexed_gemm_errors + i);
            check_run(f, meta, r.run, s::kGemmErrors, indexed_gemm_errors + i);
            const int gemm = static_cast<std::int8_t>(r.gemm);  // int8: a negative value reads back large
            if (r.linear < 0 || r.linear >= static_cast<int>(meta.linears.size()) || gemm < 0 || gemm > 2)
                throw f.fail(at + ": linear/gemm " + std::to_string(r.linear) + "/" + std::to_string(gemm) +
                             " out of range");
            // NaN is "not computed" and SQNR +inf "no error"; an error below zero is damage.
            if (r.rel_err < 0 || r.max_abs_err < 0 || r.sqnr_db == -std::numeric_limits<double>::infinity())
                throw f.fail(at + ": rel_err " + std::to_string(r.rel_err) + ", max_abs_err " +
                             std::to_string(r.max_abs_err) + ", sqnr_db " + std::to_string(r.sqnr_db) +
                             " are not errors");
            gemm_error_records.push_back(r);
        }
        indexed_gemm_errors = f.gemm_errors.rows;
        grew = true;
    }
    if (f.gate_up.rows > indexed_gate_up) {
        auto rows = f.read_records<s::GateUpAlignmentTable>(f.gate_up, indexed_gate_up, f.gate_up.rows - indexed_gate_up);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const GateUpAlignmentRecord& r = rows[i];
            const std::string at = std::string(s::kGateUpAlignment) + " row " + std::to_string(indexed_gate_up + i);
            check_run(f, meta, r.run, s::kGateUpAlignment, indexed_gate_up + i);
            if (r.linear < 0 || r.linear >= static_cast<int>(meta.linears.size()))
                throw f.fail(at + ": linear " + std::to_string(r.linear) + " out of range");
            if (r.channels < 0 || r.top_channel < -1 || r.top_channel >= r.channels || r.aligned < 0 ||
                r.aligned > r.channels)
                throw f.fail(at + ": top_channel " + std::to_string(r.top_channel) + ", aligned " +
                             std::to_string(r.aligned) + " do not fit channels " + std::to_string(r.channels));
            // A cosine's magnitude is at most 1 (NaN: not computed).
            for (double c : {r.mean_abs_cos, r.p99_abs_cos, r.max_abs_cos, r.top_cos})
                if (std::fabs(c) > 1)
                    throw f.fail(at + ": cosine " + std::to_string(c) + " outside [-1, 1]");
            gate_up_records.push_back(r);
        }
        indexed_gate_up = f.gate_up.rows;
        grew = true;
    }
    if (f.scaling_index.rows > indexed_scaling) {
        if (f.scaling_amax.rows < f.scaling_index.rows || f.scaling_scale.rows < f.scaling_index.rows)
            throw f.fail("/scaling/amax or /scaling/scale has fewer rows than /scaling/index");
        in_chunks(indexed_scaling, f.scaling_index.rows, [&](hsize_t at, hsize_t n) {
            auto rows = f.read_records<s::ScalingIndexTable>(f.scaling_index, at, n);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                check_run(f, meta, rows[i].run, s::kScalingIndex, at + i);
                scaling_rows[{rows[i].run, rows[i].step}] = at + i;
            }
        });
        indexed_scaling = f.scaling_index.rows;
        grew = true;
    }
    if (f.operands.rows > indexed_operands) {
        std::map<std::pair<std::int32_t, int>, std::size_t> tails;  // (run, slot) -> its first new entry
        in_chunks(indexed_operands, f.operands.rows, [&](hsize_t at, hsize_t n) {
            auto rows = f.read_keys(f.operands, at, n);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const hsize_t row = at + i;
                const int slot = check_key(f, meta, rows[i], s::kOperands, row);
                operand_rows[{rows[i].run, rows[i].step}].push_back(row);
                auto& series = series_rows[{rows[i].run, slot}];
                tails.try_emplace({rows[i].run, slot}, series.size());
                series.push_back({rows[i].step, row});
            }
        });
        for (const auto& [key, tail] : tails) merge_tail(series_rows[key], tail);
        indexed_operands = f.operands.rows;
        grew = true;
    }
    if (f.blockmaps.rows > indexed_blockmaps) {
        const RecordDecoder decoder{f, meta};
        in_chunks(indexed_blockmaps, f.blockmaps.rows, [&](hsize_t at, hsize_t n) {
            const auto rows = f.read_table(f.blockmaps, at, n);
            for (hsize_t i = 0; i < n; ++i) {
                const unsigned char* bytes = rows.data() + i * f.blockmaps.layout.size;
                const OperandKey key = TraceFile::key_at(bytes);
                check_key(f, meta, key, s::kBlockMaps, at + i);
                decoder.check_blockmap(bytes, at + i);
                blockmap_rows[{key.run, key.step}].push_back(at + i);
            }
        });
        indexed_blockmaps = f.blockmaps.rows;
        grew = true;
    }
    if (f.ops.rows > indexed_ops) {
        std::vector<std::size_t> tails(op_rows.size());
        for (std::size_t r = 0; r < op_rows.size(); ++r) tails[r] = op_rows[r].size();
        in_chunks(indexed_ops, f.ops.rows, [&](hsize_t at, hsize_t n) {
            auto rows = f.read_records<s::OpTable>(f.ops, at, n);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                // Checked here, not when indexed rows are read, so every reader has one verdict.
                check_op_row(f, meta, rows[i], at + i);
                auto& v = op_rows[rows[i].run];
                const hsize_t row = at + i;
                if (v.size() > tails[rows[i].run] && v.back().step == rows[i].step &&
                    v.back().first + v.back().count == row)
                    ++v.back().count;
                else
                    v.push_back({rows[i].step, row, 1});
            }
        });
        for (std::size_t r = 0; r < op_rows.size(); ++r) merge_tail(op_rows[r], tails[r]);
        indexed_ops = f.ops.rows;
        grew = true;
    }
    if (f.kernel_steps.rows > indexed_kernel_steps) {
        kernel_step_rows.resize(meta.runs.size());
        std::vector<std::size_t> tails(kernel_step_rows.size());
        for (std::size_t r = 0; r < kernel_step_rows.size(); ++r) tails[r] = kernel_step_rows[r].size();
        in_chunks(indexed_kernel_steps, f.kernel_steps.rows, [&](hsize_t at, hsize_t n) {
            const auto rows = read_kernel_step_rows(f, meta, at, n);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const KernelStepRecord& k = rows[i];
                auto& v = kernel_step_rows[k.run];
                const hsize_t row = at + i;
                if (v.size() > tails[k.run] && v.back().step == k.step && v.back().first + v.back().count == row)
                    ++v.back().count;
                else
                    v.push_back({k.step, row, 1});
            }
        });
        for (std::size_t r = 0; r < kernel_step_rows.size(); ++r) merge_tail(kernel_step_rows[r], tails[r]);
        indexed_kernel_steps = f.kernel_steps.rows;
        grew = true;
    }
    return grew;
}

}  // namespace fp8scope::trace
