// LivePublisher: capture records to the live server (live_publisher.h).
#include "live_publisher.h"

#include <type_traits>

namespace fp8scope::live {

void LivePublisher::write(trace::Record record) {
    std::visit(
        [&](const auto& r) {
            using T = std::decay_t<decltype(r)>;
            if constexpr (!std::is_same_v<T, trace::StepRecord> && !std::is_same_v<T, trace::EventRecord>)
                server_.publish(r);
        },
        record);
}

}  // namespace fp8scope::live
