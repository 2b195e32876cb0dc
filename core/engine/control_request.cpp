#include "engine/control_request.h"

#include <sstream>
#include <stdexcept>

namespace fp8scope {

std::string encode_requests(const std::deque<ControlRequest>& rs) {
    std::string out;
    for (const ControlRequest& r : rs)
        out += std::to_string(int(r.kind)) + " " + std::to_string(r.run) + " " + std::to_string(r.value) + " " +
               r.text + "\n";
    return out;
}

std::deque<ControlRequest> decode_requests(const std::string& text) {
    std::deque<ControlRequest> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        int kind = 0;
        ControlRequest r{ControlRequest::Stop, -1, {}, 0};
        if (!(fields >> kind >> r.run >> r.value) || kind < ControlRequest::Pause || kind > ControlRequest::CaptureEvery)
            throw std::runtime_error("rank 0 sent a control request this rank cannot read: '" + line + "'");
        r.kind = ControlRequest::Kind(kind);
        fields.get();  // the space before the text
        std::getline(fields, r.text);
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace fp8scope
