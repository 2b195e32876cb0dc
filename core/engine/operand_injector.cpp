// Scaled copies of injected GEMM operands (operand_injector.h).
#include "engine/operand_injector.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fp8scope {

struct OperandInjector::Entry {
    Injection injection;
    DeviceBuffer<std::int32_t> index;  // injection.indices in backend memory
    std::int64_t max_index = 0;
};

struct OperandInjector::Linear {
    std::vector<std::unique_ptr<Entry>> entries;
    DeviceBuffer<float> x, w;  // the scaled copies, alive until backward reads their casts
};

OperandInjector::OperandInjector(Backend& backend) : backend_(backend), dy_(backend) {}
OperandInjector::~OperandInjector() = default;

void OperandInjector::set(const std::vector<LinearInjection>& list, std::size_t linears) {
    per_linear_.clear();
    if (list.empty()) return;
    for (std::size_t l = 0; l < linears; ++l) {
        auto lin = std::make_unique<Linear>();
        lin->x.bind(backend_);
        lin->w.bind(backend_);
        per_linear_.push_back(std::move(lin));
    }
    for (const LinearInjection& li : list) {
        auto e = std::make_unique<Entry>();
        e->injection = li.injection;
        const auto& idx = li.injection.indices;
        std::vector<std::int32_t> host(idx.begin(), idx.end());
        e->index = DeviceBuffer<std::int32_t>(backend_, host.size());
        backend_.copy_from_host(e->index.data(), host.data(), host.size() * sizeof(std::int32_t));
        e->max_index = idx.empty() ? -1 : *std::max_element(idx.begin(), idx.end());
        per_linear_.at(std::size_t(li.linear))->entries.push_back(std::move(e));
    }
}

TensorDesc OperandInjector::apply(int linear, Operand o, const TensorDesc& values, std::int64_t step) {
    if (per_linear_.empty()) return values;
    Linear& lin = *per_linear_[std::size_t(linear)];
    TensorDesc out = values;
    bool copied = false;
    for (const auto& e : lin.entries) {
        const Injection& in = e->injection;
        if (in.operand != o || !in.active(step)) continue;
        if (e->max_index >= (in.rows ? values.rows : values.cols))
            throw std::logic_error("outlier injection: index " + std::to_string(e->max_index) + " outside " +
                                   std::string(operand_name(o)) + " (" + std::to_string(values.rows) + " x " +
                                   std::to_string(values.cols) + ")");
        if (!copied) {
            DeviceBuffer<float>& copy = o == Operand::X ? lin.x : o == Operand::W ? lin.w : dy_;
            const std::size_t bytes = std::size_t(values.numel()) * dtype_size(values.dtype);
            out.data = copy.grow((bytes + sizeof(float) - 1) / sizeof(float));
            backend_.copy(out.data, values.data, bytes);
            copied = true;
        }
        backend_.scale_channels(out, e->index.data(), int(in.indices.size()), in.rows, in.scale);
    }
    return out;
}

}  // namespace fp8scope
