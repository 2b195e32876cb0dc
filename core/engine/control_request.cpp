#include "engine/control_request.h"

#include <sstream>
#include <stdexcept>


namespace fp8scope {

std::vector<int> parse_ranks(const std::string& text) {
    std::istringstream in(text);
    std::vector<int> out;
    int r = 0;
    while (in >> r) {
        if (r < 1 || (!out.empty() && r <= out.back())) return {};
        out.push_back(r);
    }
    if (!in.eof()) return {};
    return out;
}

namespace {

// Why a request rank 0 may send is wrong for a job of `runs` runs; empty when it is right.
std::string invalid(const ControlRequest& r, int runs, const RecipeBook& book) {
    switch (r.kind) {
    case ControlRequest::Pause:
    case ControlRequest::Resume:
    case ControlRequest::Stop:  // a stop travels as the step record's flag
        return "pause, resume and stop never travel as requests";
    case ControlRequest::Switch:
        if (r.run < 0 || r.run >= runs)
            return "run " + std::to_string(r.run) + " is outside 0.." + std::to_string(runs - 1);
        try {
            book.check(r.text);
        } catch (const std::invalid_argument& e) {
            return e.what();
        }
        break;
    case ControlRequest::CaptureEvery:
        if (r.value < 0) return "capture interval " + std::to_string(r.value) + " is negative";
        break;
    case ControlRequest::KernelSteps:
        if (r.value < 1) return "kernel records of " + std::to_string(r.value) + " steps asked, expected 1 or more";
        break;
    case ControlRequest::Checkpoint:
        break;
    case ControlRequest::Admit:
        if (parse_ranks(r.text).empty()) return "ranks to admit '" + r.text + "' are not rank numbers in order";
        break;
    }
    if (r.kind != ControlRequest::Switch && r.run != -1) return "run " + std::to_string(r.run) + " given, expected -1";
    if (r.kind != ControlRequest::CaptureEvery && r.kind != ControlRequest::KernelSteps && r.value != 0)
        return "value " + std::to_string(r.value) + " given, expected 0";
    return {};
}

}  // namespace

std::string encode_requests(const std::deque<ControlRequest>& rs) {
    std::string out;
    for (const ControlRequest& r : rs)
        out += std::to_string(int(r.kind)) + " " + std::to_string(r.run) + " " + std::to_string(r.value) + " " +
               r.text + "\n";
    return out;
}

std::deque<ControlRequest> decode_requests(const std::string& text, int runs, const RecipeBook& book) {
    std::deque<ControlRequest> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        auto unreadable = [&](const std::string& why) {
            return std::runtime_error("rank 0 sent a control request this rank cannot read: '" + line + "' (" + why +
                                      ")");
        };
        std::istringstream fields(line);
        int kind = 0;
        ControlRequest r{ControlRequest::Stop, -1, {}, 0};
        if (!(fields >> kind >> r.run >> r.value) || kind < ControlRequest::Pause || kind > ControlRequest::Admit)
            throw unreadable("expected \"kind run value text\" with kind 0..7");
        r.kind = ControlRequest::Kind(kind);
        if (fields.get() != ' ') throw unreadable("no space before the text");
        std::getline(fields, r.text);
        if (const std::string why = invalid(r, runs, book); !why.empty()) throw unreadable(why);
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace fp8scope
