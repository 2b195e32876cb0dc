// LivePublisher: every record of a run to the live server (live_publisher.h).
#include "live_publisher.h"

#include <type_traits>

namespace fp8scope::live {

void LivePublisher::write(trace::Record record) {
    std::visit(
        [&](const auto& r) {
            // The live protocol has no message for a GEMM's output error yet (a new type
            // raises its version): the trace file holds them.
            if constexpr (!std::is_same_v<std::decay_t<decltype(r)>, trace::GemmErrorRecord>) server_.publish(r);
        },
        record);
}

}  // namespace fp8scope::live
