// Several traces overlaid as one (File > Open as comparison, or two traces on the command
// line): the runs of every trace side by side, named by their file ("b.h5: delayed"), so
// every view compares them with no change. Each part's batches are rewritten into the
// merged ids before the store sees them: runs are numbered on from the earlier parts', and
// quantizers, recipes, op names and linear layers are united by name.
//
// Traces of different models merge too: a linear of the same name in several traces is
// one linear (its operand slots shared), the others belong to the traces that have them,
// and a trace's per-step amax and scale rows leave NaN in the slots of linears it lacks.
// A linear of one name can have other shapes in another trace: the merged meta keeps the
// first trace's, shapesDiffer() says so, and the views compare such operands only after
// checking their element counts.
#pragma once

#include <QString>
#include <vector>

#include "models/series_store.h"

namespace fp8scope::views {

class TraceMerge {
public:
    struct Part {
        QString name;  // shown before each run name: the file name
        trace::TraceMeta meta;
    };
    // One part: its meta unchanged, and remap() leaves its batches as they are.
    explicit TraceMerge(std::vector<Part> parts);

    const trace::TraceMeta& meta() const { return meta_; }
    // Each merged run's rank (its part's trace's) and run in that part: for the parts of
    // one job's rank traces.
    std::vector<RankRun> rankRuns() const;
    std::size_t parts() const { return maps_.size(); }
    // True when merged linear `linear` has other in/out features in some part than the
    // merged meta's (the first part's that has it).
    bool shapesDiffer(int linear) const;
    // Rewrites a batch of part `part` into the merged ids. Kernel names new to the merged
    // trace are added and keep their op_names records, renumbered.
    void remap(std::size_t part, TraceBatch& batch);

private:
    struct IdMap {
        int first_run = 0;
        int rank = 0;  // the part's trace's (a data-parallel job's rank trace)
        std::vector<int> quantizer, training_recipe, op, linear;  // part id -> merged id
        bool same_linears = true;  // linear ids are the merged ids: slots stay
    };
    int opId(const std::string& name);

    trace::TraceMeta meta_;
    std::vector<IdMap> maps_;
    std::vector<char> shapes_differ_;  // per merged linear
    std::size_t announced_ops_ = 0;  // merged op names handed to the store so far
};

}  // namespace fp8scope::views
