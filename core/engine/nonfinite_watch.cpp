#include "engine/nonfinite_watch.h"

namespace fp8scope {

const char* nonfinite_source_name(NonFiniteRecord::Source s) {
    switch (s) {
        case NonFiniteRecord::Source::Operand: return "operand";
        case NonFiniteRecord::Source::Loss: return "loss";
        case NonFiniteRecord::Source::Gradient: return "gradient";
    }
    return "unknown";
}

std::string NonFiniteRecord::describe() const {
    std::string s = "step " + std::to_string(step) + ", rank " + std::to_string(rank) + ", run " + std::to_string(run) +
                     ": ";
    if (source == Source::Loss) return s + "the loss (no GEMM operand held one before it)";
    if (source == Source::Gradient) return s + "the gradients (no GEMM operand held one before them)";
    s += "operand " + std::string(operand_name(operand)) + " of " + linear_name + " (layer " + std::to_string(layer) +
         ", linear " + std::to_string(linear) + "), " + std::string(gemm_name(gemm)) + ", " + recipe + ", element (" +
         std::to_string(row) + ", " + std::to_string(col) + ") of " + std::to_string(rows) + "x" + std::to_string(cols);
    if (block >= 0)
        s += ", block " + std::to_string(block) + " (" + std::to_string(block_rows) + "x" + std::to_string(block_cols) +
             " blocks)";
    else s += ", per-tensor scale";
    return s;
}

NonFiniteWatch::NonFiniteWatch(Backend& backend) : backend_(backend), word_(backend, 1) {
    backend_.copy_from_host(word_.data(), &kNoNonFinite, sizeof kNoNonFinite);
}

void NonFiniteWatch::check(const TensorDesc& values, NonFiniteSite site) {
    if (found_) return;
    sites_.push_back(std::move(site));
    backend_.find_nonfinite(values, next_++, word_.data());
}

void NonFiniteWatch::stage() {
    staged_next_ = next_;
    backend_.stage_nonfinite(word_.data());
}

void NonFiniteWatch::back_to(const Mark& m) {
    sites_ = m.sites;
    base_ = m.base, next_ = m.next, staged_next_ = m.staged_next;
    found_ = m.found;
    backend_.copy_from_host(word_.data(), &kNoNonFinite, sizeof kNoNonFinite);
}

std::optional<NonFiniteRecord> NonFiniteWatch::poll() { return resolve(backend_.staged_nonfinite(), staged_next_); }

std::optional<NonFiniteRecord> NonFiniteWatch::read_now() {
    std::uint64_t word = kNoNonFinite;
    backend_.copy_to_host(&word, word_.data(), sizeof word);
    return resolve(word, next_);
}

std::optional<NonFiniteRecord> NonFiniteWatch::resolve(std::uint64_t word, std::uint32_t clean_below) {
    if (found_) return std::nullopt;
    if (word == kNoNonFinite) {  // every site queued before the copy was clean
        while (base_ < clean_below && !sites_.empty()) sites_.pop_front(), ++base_;
        return std::nullopt;
    }
    const std::uint32_t tag = std::uint32_t(word >> 32);
    const std::int64_t index = std::int64_t(word & 0xffffffffull);
    const NonFiniteSite& site = sites_.at(tag - base_);
    NonFiniteRecord r;
    r.source = NonFiniteRecord::Source::Operand;
    r.step = site.step;
    r.layer = site.layer, r.linear = site.linear;
    r.linear_name = site.linear_name, r.recipe = site.recipe;
    r.gemm = site.gemm, r.operand = site.operand;
    r.rows = site.rows, r.cols = site.cols;
    r.row = site.cols ? index / site.cols : 0, r.col = site.cols ? index % site.cols : 0;
    r.block_rows = site.block_rows, r.block_cols = site.block_cols;
    if (site.block_rows > 0 && site.block_cols > 0) {
        const std::int64_t grid_cols = (site.cols + site.block_cols - 1) / site.block_cols;
        r.block = r.row / site.block_rows * grid_cols + r.col / site.block_cols;
    }
    found_ = r;
    sites_.clear();
    return r;
}

}  // namespace fp8scope
