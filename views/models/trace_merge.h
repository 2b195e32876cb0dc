// Several traces overlaid as one (File > Open as comparison, or two traces on the command
// line): the runs of every trace side by side, named by their file ("b.h5: delayed"), so
// every view compares them with no change. Each part's batches are rewritten into the
// merged ids before the store sees them: runs are numbered on from the earlier parts', and
// quantizers, recipes and op names are united by name.
//
// The traces must have the same linear layers (the same model): operand slots are shared.
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
    // Throws std::runtime_error naming the part when its layers differ from the first's.
    // One part: its meta unchanged, and remap() leaves its batches as they are.
    explicit TraceMerge(std::vector<Part> parts);

    const trace::TraceMeta& meta() const { return meta_; }
    std::size_t parts() const { return maps_.size(); }
    // Rewrites a batch of part `part` into the merged ids. Kernel names new to the merged
    // trace are added and keep their op_names records, renumbered.
    void remap(std::size_t part, TraceBatch& batch);

private:
    struct IdMap {
        int first_run = 0;
        std::vector<int> quantizer, training_recipe, op;  // part id -> merged id
    };
    int opId(const std::string& name);

    trace::TraceMeta meta_;
    std::vector<IdMap> maps_;
    std::size_t announced_ops_ = 0;  // merged op names handed to the store so far
};

}  // namespace fp8scope::views
