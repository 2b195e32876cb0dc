// Resolution of precision plans and the book of recipe names (precision_plan.h).
#include "fp8/precision_plan.h"

#include <algorithm>
#include <stdexcept>

namespace fp8scope {

bool glob_match(std::string_view pattern, std::string_view name) {
    // Iterative wildcard match: on a mismatch, back up to the last '*' and let it take one
    // more character.
    std::size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
    while (n < name.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
            ++p;
            ++n;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            resume = n;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            n = ++resume;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

Gemm gemm_from_name(std::string_view name) {
    for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
        if (gemm_name(g) == name) return g;
    throw std::invalid_argument("'" + std::string(name) + "' is not a GEMM (fprop, dgrad, wgrad)");
}

std::pair<Operand, Operand> gemm_operands(Gemm g) {
    switch (g) {
        case Gemm::Fprop: return {Operand::X, Operand::W};
        case Gemm::Dgrad: return {Operand::DY, Operand::W};
        case Gemm::Wgrad: break;
    }
    return {Operand::DY, Operand::X};
}

std::pair<Gemm, Gemm> operand_gemms(Operand o) {
    switch (o) {
        case Operand::X: return {Gemm::Fprop, Gemm::Wgrad};
        case Operand::W: return {Gemm::Fprop, Gemm::Dgrad};
        case Operand::DY: break;
    }
    return {Gemm::Dgrad, Gemm::Wgrad};
}

namespace {

bool built_in_base(std::string_view name) {
    const auto names = training_recipe_names();
    return std::find(names.begin(), names.end(), name.substr(0, name.find(':'))) != names.end();
}

// A built-in recipe, with its options where it takes some (nvfp4:rht=0).
bool built_in(std::string_view name) {
    if (!built_in_base(name)) return false;
    try {
        (void)training_recipe(name);
        return true;
    } catch (const std::invalid_argument&) {
        return false;
    }
}

TrainingRecipe built_in_recipe(std::string_view name, const std::string& field) {
    if (built_in(name)) return training_recipe(name);
    if (built_in_base(name)) {  // a built-in recipe with a wrong option: its own message
        try {
            (void)training_recipe(name);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(field + ": " + e.what());
        }
    }
    std::string known;
    for (const auto& n : training_recipe_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument(field + ": '" + std::string(name) + "' is not a built-in training recipe (" + known +
                                ")");
}

std::string override_field(std::size_t i) { return "overrides[" + std::to_string(i) + "]"; }

}  // namespace

PrecisionPlan::PrecisionPlan(TrainingRecipe recipe) : name_(recipe.name) { recipes_.push_back(std::move(recipe)); }

PrecisionPlan::PrecisionPlan(const CustomRecipe& custom, const std::vector<LinearInfo>& linears)
    : name_(custom.name) {
    recipes_.push_back(built_in_recipe(custom.base, "base"));
    per_linear_.assign(linears.size(), {0, 0, 0});
    for (std::size_t i = 0; i < custom.overrides.size(); ++i) {
        const PrecisionOverride& o = custom.overrides[i];
        TrainingRecipe r = built_in_recipe(o.recipe, override_field(i) + ".recipe");
        auto it = std::find_if(recipes_.begin(), recipes_.end(), [&](const auto& t) { return t.name == r.name; });
        const auto index = std::uint8_t(it - recipes_.begin());
        if (it == recipes_.end()) recipes_.push_back(std::move(r));
        for (const std::string& pattern : o.linears) {
            bool matched = false;
            for (std::size_t l = 0; l < linears.size(); ++l) {
                if (!glob_match(pattern, linears[l].name)) continue;
                matched = true;
                if (o.gemms.empty()) per_linear_[l] = {index, index, index};
                for (Gemm g : o.gemms) per_linear_[l][std::size_t(g)] = index;
            }
            if (!matched)
                throw std::invalid_argument(override_field(i) + ".linears: '" + pattern +
                                            "' matches no linear of the model" +
                                            (linears.empty() ? std::string()
                                                             : " (" + linears.front().name + " ... " +
                                                                   linears.back().name + ")"));
        }
    }
    // Recipes no GEMM ended up with (every match overridden again) are dropped, so that
    // overridden() says what the GEMMs really do; the base stays, as the plan's own recipe.
    std::vector<std::uint8_t> used(recipes_.size(), 0), remap(recipes_.size(), 0);
    used[0] = 1;
    for (const auto& l : per_linear_)
        for (auto r : l) used[r] = 1;
    std::vector<TrainingRecipe> kept;
    for (std::size_t r = 0; r < recipes_.size(); ++r)
        if (used[r]) {
            remap[r] = std::uint8_t(kept.size());
            kept.push_back(std::move(recipes_[r]));
        }
    recipes_ = std::move(kept);
    for (auto& l : per_linear_)
        for (auto& r : l) r = remap[r];
}

const TrainingRecipe& PrecisionPlan::recipe(int linear, Gemm g) const {
    if (per_linear_.empty()) return recipes_.front();
    return recipes_[per_linear_.at(std::size_t(linear))[std::size_t(g)]];
}

const Recipe* PrecisionPlan::quantizer(int linear, Gemm g, Operand o) const {
    const auto& q = recipe(linear, g).operand(o);
    return q ? &*q : nullptr;
}

bool PrecisionPlan::quantized() const {
    if (per_linear_.empty()) return base().quantized();
    return std::any_of(per_linear_.begin(), per_linear_.end(), [&](const auto& gemms) {
        return std::any_of(gemms.begin(), gemms.end(), [&](auto r) { return recipes_[r].quantized(); });
    });
}

RecipeBook::RecipeBook(std::vector<CustomRecipe> custom) : custom_(std::move(custom)) {
    for (std::size_t i = 0; i < custom_.size(); ++i) {
        const CustomRecipe& c = custom_[i];
        const std::string field = "recipes." + c.name;
        if (c.name.empty()) throw std::invalid_argument("recipes: a custom recipe needs a name");
        if (built_in(c.name))
            throw std::invalid_argument(field + ": the name is a built-in training recipe; choose another");
        for (std::size_t j = 0; j < i; ++j)
            if (custom_[j].name == c.name) throw std::invalid_argument(field + ": named twice");
        try {
            built_in_recipe(c.base, "base");
            for (std::size_t o = 0; o < c.overrides.size(); ++o) {
                const PrecisionOverride& ov = c.overrides[o];
                built_in_recipe(ov.recipe, override_field(o) + ".recipe");
                if (ov.linears.empty()) throw std::invalid_argument(override_field(o) + ".linears: no pattern");
                for (const auto& p : ov.linears)
                    if (p.empty()) throw std::invalid_argument(override_field(o) + ".linears: an empty pattern");
            }
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(field + "." + e.what());
        }
    }
}

bool RecipeBook::knows(std::string_view name) const {
    return built_in(name) || std::any_of(custom_.begin(), custom_.end(), [&](const auto& c) { return c.name == name; });
}

std::vector<std::string> RecipeBook::names() const {
    auto names = training_recipe_names();
    for (const auto& c : custom_) names.push_back(c.name);
    return names;
}

void RecipeBook::check(std::string_view name) const {
    if (knows(name)) return;
    if (built_in_base(name)) (void)training_recipe(name);  // throws, naming the wrong option
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown training recipe '" + std::string(name) + "' (known: " + known + ")");
}

PrecisionPlan RecipeBook::plan(std::string_view name, const std::vector<LinearInfo>& linears) const {
    for (const auto& c : custom_) {
        if (c.name != name) continue;
        try {
            return PrecisionPlan(c, linears);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("recipes." + c.name + "." + e.what());
        }
    }
    check(name);
    return PrecisionPlan(training_recipe(name));
}

}  // namespace fp8scope
