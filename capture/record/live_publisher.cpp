// LivePublisher: every record of a run to the live server (live_publisher.h).
#include "live_publisher.h"

#include <type_traits>

namespace fp8scope::live {

void LivePublisher::write(trace::Record record) {
    std::visit(
        [&](const auto& r) {
            // The live protocol has no message for a GEMM's output error or a gate/up
            // alignment yet (a new type raises its version): the trace file holds them.
            using R = std::decay_t<decltype(r)>;
            if constexpr (!std::is_same_v<R, trace::GemmErrorRecord> && !std::is_same_v<R, trace::GateUpAlignmentRecord>)
                server_.publish(r);
        },
        record);
}

}  // namespace fp8scope::live
