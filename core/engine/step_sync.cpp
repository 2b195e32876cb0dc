#include "engine/step_sync.h"

#include <stdexcept>
#include <utility>

#include "engine/model.h"

namespace fp8scope {

WorldChange StepSync::change_world(const std::exception& fault, std::int64_t, const std::vector<std::int64_t>&) {
    throw std::runtime_error(std::string("not an elastic job: ") + fault.what());
}

WorldJoin StepSync::admit(const std::vector<int>&, const std::function<std::string()>&) {
    throw std::logic_error("only an elastic job admits ranks");
}

void SingleProcess::attach(Model& model) { model.set_step_sync(this); }

StepAgreement SingleProcess::agree(std::int64_t, double, std::deque<ControlRequest> local) {
    for (ControlRequest& r : local) held_.push_back(std::move(r));
    return {};
}

std::deque<ControlRequest> SingleProcess::requests_due(std::deque<ControlRequest> local) {
    for (ControlRequest& r : local) held_.push_back(std::move(r));
    return std::exchange(held_, {});
}

}  // namespace fp8scope
