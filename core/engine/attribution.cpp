// Attribution planning: groups, restored recipes, recovered fractions, the greedy choice.
#include "engine/attribution.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/train_config.h"

namespace fp8scope {

GroupBy group_by_from_name(std::string_view name) {
    if (name == "layer") return GroupBy::Layer;
    if (name == "linear") return GroupBy::Linear;
    if (name == "gemm") return GroupBy::Gemm;
    throw std::invalid_argument("--groups: '" + std::string(name) + "' is not layer, linear or gemm");
}

const char* group_by_name(GroupBy by) {
    switch (by) {
    case GroupBy::Layer: return "layer";
    case GroupBy::Linear: return "linear";
    case GroupBy::Gemm: return "gemm";
    }
    return "?";
}

std::vector<AttributionGroup> attribution_groups(const std::vector<LinearInfo>& linears, GroupBy by) {
    std::vector<AttributionGroup> groups;
    switch (by) {
    case GroupBy::Layer:
        for (const LinearInfo& l : linears) {
            const std::string name = "blocks." + std::to_string(l.layer);
            if (groups.empty() || groups.back().name != name)
                groups.push_back({name, by, {{name + ".*"}, {}, "baseline"}});
        }
        break;
    case GroupBy::Linear:
        for (const LinearInfo& l : linears) groups.push_back({l.name, by, {{l.name}, {}, "baseline"}});
        break;
    case GroupBy::Gemm:
        for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
            groups.push_back({std::string(gemm_name(g)), by, {{"*"}, {g}, "baseline"}});
        break;
    }
    return groups;
}

namespace {

// Appends `o` to `out`, folded into the last override when they differ only in their
// linears or only in their GEMMs.
void add_merged(std::vector<PrecisionOverride>& out, const PrecisionOverride& o, std::size_t first) {
    if (out.size() > first) {
        PrecisionOverride& last = out.back();
        if (last.recipe == o.recipe && last.gemms == o.gemms) {
            for (const auto& p : o.linears)
                if (std::find(last.linears.begin(), last.linears.end(), p) == last.linears.end()) last.linears.push_back(p);
            return;
        }
        if (last.recipe == o.recipe && last.linears == o.linears && !last.gemms.empty() && !o.gemms.empty()) {
            for (Gemm g : o.gemms)
                if (std::find(last.gemms.begin(), last.gemms.end(), g) == last.gemms.end()) last.gemms.push_back(g);
            if (last.gemms.size() == 3) last.gemms.clear();  // all three: say nothing
            return;
        }
    }
    out.push_back(o);
}

}  // namespace

CustomRecipe restored_recipe(const RecipeBook& book, std::string_view recipe,
                             const std::vector<AttributionGroup>& groups, std::string name) {
    book.check(recipe);
    CustomRecipe out{std::move(name), std::string(recipe), {}};
    for (const CustomRecipe& c : book.custom())
        if (c.name == recipe) {
            out.base = c.base;
            out.overrides = c.overrides;
        }
    const std::size_t own = out.overrides.size();
    for (const AttributionGroup& g : groups) add_merged(out.overrides, g.restore, own);
    return out;
}

std::string override_snippet(const CustomRecipe& recipe, int indent) {
    TrainConfig c;
    c.recipes = {recipe};
    const nlohmann::json all = nlohmann::json::parse(train_config_to_json(c));
    return nlohmann::json{{"recipes", all.at("recipes")}}.dump(indent);
}

double recovered_fraction(double loss_recipe, double loss, double loss_baseline) {
    const double gap = loss_recipe - loss_baseline;
    if (gap == 0) return std::nan("");
    return (loss_recipe - loss) / gap;
}

std::vector<int> rank_groups(const std::vector<double>& recovered) {
    std::vector<int> order(recovered.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = int(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        const double x = recovered[std::size_t(a)], y = recovered[std::size_t(b)];
        if (std::isnan(y)) return !std::isnan(x);
        return !std::isnan(x) && x > y;
    });
    return order;
}

std::size_t greedy_count(const std::vector<double>& recovered, const std::vector<int>& ranking, double gap,
                         double target) {
    double sum = 0;
    for (std::size_t k = 0; k < ranking.size(); ++k) {
        const double r = recovered[std::size_t(ranking[k])];
        if (std::isfinite(r)) sum += r;
        if (gap * (1 - sum) <= target) return k + 1;
    }
    return ranking.size();
}

Selection select_groups(const std::vector<double>& recovered, const std::vector<int>& ranking, double gap,
                        double target, int max_verifications,
                        const std::function<double(const std::vector<int>&)>& measure_gap) {
    Selection s;
    if (ranking.empty()) return s;
    std::size_t count = greedy_count(recovered, ranking, gap, target);
    for (int round = 0; round < std::max(1, max_verifications); ++round) {
        std::vector<int> set(ranking.begin(), ranking.begin() + std::ptrdiff_t(count));
        const double measured = measure_gap(set);
        s.attempts.push_back({set, measured});
        s.chosen = std::move(set);
        s.verified_gap = measured;
        s.met = measured <= target;
        if (s.met || count == ranking.size()) break;
        ++count;
    }
    return s;
}

}  // namespace fp8scope
