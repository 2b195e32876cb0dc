// Per-linear precision: a training recipe for the whole model plus ordered overrides, each
// giving the linears that match its name patterns (and, if it says so, only some of their
// GEMMs) another training recipe, "baseline" to keep them in high precision. Later
// overrides win. The plan resolves, for every linear and GEMM, the quantizer of each of the
// GEMM's two operands (training_recipe.h has the operands and copies).
//
// A custom recipe is such a plan under a name of its own ("nvfp4_bf16_last"); a RecipeBook
// knows the built-in recipes and a config's custom ones, and turns any of their names into
// a plan for a model's linears.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp8/training_recipe.h"
#include "operands.h"

namespace fp8scope {

struct PrecisionOverride {
    std::vector<std::string> linears;  // name patterns: '*' any run of characters, '?' one
    std::vector<Gemm> gemms;           // the GEMMs it sets; empty: all three
    std::string recipe;                // a built-in training recipe ("baseline": high precision)
};

struct CustomRecipe {
    std::string name;
    std::string base;  // the built-in training recipe of every GEMM no override sets
    std::vector<PrecisionOverride> overrides;
};

// Glob match of a whole name: '*' matches any run of characters (none too), '?' one.
bool glob_match(std::string_view pattern, std::string_view name);
// "fprop", "dgrad", "wgrad"; throws std::invalid_argument naming the text.
Gemm gemm_from_name(std::string_view name);
// The operands a GEMM reads, as (A, B) of the backend's GEMM: fprop (X, W), dgrad (dY, W),
// wgrad (dY, X).
std::pair<Operand, Operand> gemm_operands(Gemm g);
// The GEMMs that read an operand's rowwise and columnwise copies: X (fprop, wgrad),
// W (fprop, dgrad), dY (dgrad, wgrad).
std::pair<Gemm, Gemm> operand_gemms(Operand o);

class PrecisionPlan {
public:
    PrecisionPlan() : PrecisionPlan(training_recipe("baseline")) {}
    // Every GEMM of every linear under `recipe`.
    explicit PrecisionPlan(TrainingRecipe recipe);
    // Resolves `custom` for these linears. Throws std::invalid_argument naming the field
    // (overrides[i].linears, .recipe) when a recipe is not built in or a pattern matches
    // no linear.
    PrecisionPlan(const CustomRecipe& custom, const std::vector<LinearInfo>& linears);

    const std::string& name() const { return name_; }
    const TrainingRecipe& base() const { return recipes_.front(); }
    // The training recipes the plan uses, the base first, each once.
    const std::vector<TrainingRecipe>& recipes() const { return recipes_; }
    // True when some GEMM follows another recipe than the base.
    bool overridden() const { return recipes_.size() > 1; }
    // The training recipe GEMM g of `linear` follows.
    const TrainingRecipe& recipe(int linear, Gemm g) const;
    // The quantizer of operand o as GEMM g of `linear` reads it; null: high precision.
    const Recipe* quantizer(int linear, Gemm g, Operand o) const;
    // True when any GEMM quantizes any operand.
    bool quantized() const;

private:
    std::string name_;
    std::vector<TrainingRecipe> recipes_;                 // [0]: the base
    std::vector<std::array<std::uint8_t, 3>> per_linear_;  // index into recipes_ per GEMM; empty: all base
};

// The training recipes a run may name: the built-in ones and a config's custom ones.
class RecipeBook {
public:
    // Throws std::invalid_argument naming the field (recipes.NAME.base, ...) of a custom
    // recipe whose name clashes with a built-in one or whose recipes are not built in, a
    // pattern that is empty or an override without linears.
    explicit RecipeBook(std::vector<CustomRecipe> custom = {});

    bool knows(std::string_view name) const;
    // Throws std::invalid_argument naming the unknown recipe and listing the known ones.
    void check(std::string_view name) const;
    std::vector<std::string> names() const;  // built-in, then custom
    const std::vector<CustomRecipe>& custom() const { return custom_; }
    // The plan of `name` for these linears (PrecisionPlan's errors, under recipes.NAME).
    PrecisionPlan plan(std::string_view name, const std::vector<LinearInfo>& linears) const;

private:
    std::vector<CustomRecipe> custom_;
};

}  // namespace fp8scope
