#include "engine/grad_buckets.h"

#include <stdexcept>
#include <string>

namespace fp8scope {

std::vector<GradBucket> plan_grad_buckets(const std::vector<ParamTensor>& tensors, std::size_t element_bytes,
                                          std::size_t bucket_bytes) {
    std::size_t expected = 0;
    for (const ParamTensor& t : tensors) {
        if (t.offset != expected)
            throw std::invalid_argument("parameter tensor " + t.name + " starts at element " +
                                        std::to_string(t.offset) + ", expected " + std::to_string(expected) +
                                        " (the tensors must tile the flat array in order)");
        expected += t.numel();
    }
    const std::size_t limit = std::max<std::size_t>(1, bucket_bytes / std::max<std::size_t>(1, element_bytes));
    std::vector<GradBucket> out;
    for (std::size_t i = tensors.size(); i-- > 0;) {
        const ParamTensor& t = tensors[i];
        if (out.empty() || (out.back().count + t.numel() > limit && out.back().count > 0)) out.emplace_back();
        GradBucket& b = out.back();
        b.offset = t.offset;  // buckets grow towards the start of the array
        b.count += t.numel();
        b.tensors.push_back(i);
    }
    return out;
}

}  // namespace fp8scope
