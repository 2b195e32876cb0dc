// Counterfactual attribution of a recipe's loss gap: from one checkpoint, the baseline, the
// recipe R and R with one group of GEMMs restored to high precision each train in lock
// step; the loss each restored group gives back ranks the groups, and the smallest set
// that brings R within a target of the baseline is chosen greedily, then verified by one
// more run of R with the whole set restored.
//
// This file is the planning and the arithmetic, no training: the groups of a model (a
// layer, a linear or a GEMM role), the custom recipe that restores some of them (R's own
// overrides, then one "baseline" override per group, so later wins), the recovered
// fraction and the greedy choice with its bounded verification.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8/precision_plan.h"

namespace fp8scope {

enum class GroupBy { Layer, Linear, Gemm };
// "layer", "linear", "gemm"; throws std::invalid_argument naming the text.
GroupBy group_by_from_name(std::string_view name);
const char* group_by_name(GroupBy by);

struct AttributionGroup {
    std::string name;              // "blocks.1", "blocks.1.mlp.fc2", "wgrad"
    GroupBy kind = GroupBy::Layer;
    PrecisionOverride restore;     // the override that puts the group in high precision
};

// The groups of a model's linears, in model order: a layer ("blocks.L.*"), a linear (its
// name) or a GEMM role (every linear's fprop, dgrad or wgrad).
std::vector<AttributionGroup> attribution_groups(const std::vector<LinearInfo>& linears, GroupBy by);

// The custom recipe `name`: `recipe` (built-in or one of the book's custom recipes) with
// `groups` in high precision. The groups' overrides come after R's own, merged where they
// share their GEMMs (one override listing several linears) or their linears (one listing
// several GEMMs). Throws std::invalid_argument when `recipe` is unknown.
CustomRecipe restored_recipe(const RecipeBook& book, std::string_view recipe,
                             const std::vector<AttributionGroup>& groups, std::string name);

// The config snippet that defines `recipe`: {"recipes": {"NAME": {"base": ..., "overrides":
// [...]}}}, as a config file writes it (train_config_to_json), so it reads back as a
// config whose RecipeBook gives the same plan. `indent` < 0: one line.
std::string override_snippet(const CustomRecipe& recipe, int indent = -1);

// The share of R's gap a replica closes: (loss_R - loss) / (loss_R - loss_baseline); 1 is
// the baseline's loss, 0 R's. NaN when R has no gap (loss_R == loss_baseline).
double recovered_fraction(double loss_recipe, double loss, double loss_baseline);

// Group indices by recovered fraction, the most first; ties keep model order and NaN
// comes last.
std::vector<int> rank_groups(const std::vector<double>& recovered);

// How many of the ranked groups the greedy choice takes first: the fewest whose summed
// recovered fractions bring the estimated gap, gap * (1 - sum), within `target` (at least
// one group; all when the sum never gets there).
std::size_t greedy_count(const std::vector<double>& recovered, const std::vector<int>& ranking, double gap,
                         double target);

struct Verification {
    std::vector<int> groups;  // restored together, in rank order
    double gap = 0;           // its measured loss minus the baseline's
};

struct Selection {
    std::vector<int> chosen;             // the last set verified
    double verified_gap = 0;             // its measured gap
    bool met = false;                    // verified_gap <= target
    std::vector<Verification> attempts;  // every verification, in order
};

// The greedy set (greedy_count), verified by `measure_gap` (a lock-step run of R with the
// set restored; returns its gap to the baseline); while it misses `target`, the next
// ranked group is added and measured again, at most `max_verifications` runs in all.
Selection select_groups(const std::vector<double>& recovered, const std::vector<int>& ranking, double gap,
                        double target, int max_verifications,
                        const std::function<double(const std::vector<int>&)>& measure_gap);

}  // namespace fp8scope
