// Gradient buckets for a data-parallel all-reduce overlapped with backward, as PyTorch's
// DDP cuts them: the parameter tensors in the order backward finishes their gradients
// (the reverse of their layout: the head and the last block first, the embeddings last),
// grouped into contiguous ranges of the flat gradient array of at most `bucket_bytes`
// each; a tensor larger than that is a bucket of its own. A bucket's all-reduce can start
// once backward has produced every tensor in it, while backward goes on with the rest.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/model.h"

namespace fp8scope {

struct GradBucket {
    std::size_t offset = 0, count = 0;  // elements of the flat gradient array
    std::vector<std::size_t> tensors;   // indices into the tensor list, in backward order
};

// Buckets in the order their all-reduces start. The tensors must tile the flat array
// (sorted by offset, no gaps or overlaps): throws std::invalid_argument naming the first
// tensor that does not.
std::vector<GradBucket> plan_grad_buckets(const std::vector<ParamTensor>& tensors, std::size_t element_bytes,
                                          std::size_t bucket_bytes);

}  // namespace fp8scope
