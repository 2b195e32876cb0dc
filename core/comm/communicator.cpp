#include "comm/communicator.h"

namespace fp8scope {

const char* reduce_op_name(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum: return "sum";
        case ReduceOp::Avg: return "avg";
        case ReduceOp::Max: return "max";
    }
    return "unknown";
}

}  // namespace fp8scope
