// A control request to a running trainer (pause, resume, stop, switch a run's recipe,
// checkpoint now, a new capture interval, keep the next steps' kernel records), made from another thread and applied between
// steps; and, from rank 0 of an elastic job alone, admit the ranks waiting to join. Ranks of a data-parallel job send rank 0's to each other as text.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "fp8/precision_plan.h"

namespace fp8scope {

struct ControlRequest {
    enum Kind { Pause, Resume, Stop, Switch, Checkpoint, CaptureEvery, KernelSteps, Admit } kind;
    int run = -1;
    std::string text;  // recipe name, checkpoint path, why a resume came; Admit: the launch ranks ("2 5")
    int value = 0;     // capture interval; KernelSteps: how many steps
};

// One line per request, "kind run value text" (recipe names and paths hold no newline).
std::string encode_requests(const std::deque<ControlRequest>& requests);
// The requests of a job of `runs` runs whose recipes are `book`'s (built-in and the config's
// custom ones, the same on every rank). Throws std::runtime_error naming a line it cannot
// read or one no rank 0 sends: pause or resume, a run outside the job or an unknown recipe
// to switch to, a negative capture interval, no steps of kernel records, a run or value a request has no use for, ranks to admit that
// are not numbers in order.
// An Admit request's ranks: rank numbers of 1 or more, ascending, separated by spaces;
// empty when the text is anything else.
std::vector<int> parse_ranks(const std::string& text);
std::deque<ControlRequest> decode_requests(const std::string& text, int runs, const RecipeBook& book = RecipeBook());

}  // namespace fp8scope
