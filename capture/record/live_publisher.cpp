// LivePublisher: every record of a run to the live server (live_publisher.h).
#include "live_publisher.h"

namespace fp8scope::live {

void LivePublisher::write(trace::Record record) {
    std::visit([&](const auto& r) { server_.publish(r); }, record);
}

}  // namespace fp8scope::live
