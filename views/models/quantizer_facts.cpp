// Quantizer facts from names.
#include "models/quantizer_facts.h"

#include <QObject>
#include <cmath>

#include "fp8/recipe.h"

namespace fp8scope::views {

Format quantizer_format(const std::string& quantizer) {
    try {
        return recipe_format(parse_recipe(quantizer));
    } catch (const std::exception&) {
        return Format::E4M3;
    }
}

bool cast_saturates(float amax, float scale, Format f) {
    if (!std::isfinite(amax) || !std::isfinite(scale)) return false;
    const float y = std::fabs(amax) * scale;  // float32, as the cast multiplies
    if (std::isnan(y)) return false;
    // Without saturation an overflowing value encodes as NaN (E4M3) or Inf (E5M2).
    return !is_finite_code(f, encode(f, y, Overflow::NonSaturate));
}

bool what_if_applies(const std::string& quantizer, bool in_use) {
    if (in_use) return true;
    try {
        return !std::holds_alternative<DelayedScaling>(parse_recipe(quantizer));
    } catch (const std::exception&) {
        return true;
    }
}

QString what_if_void_reason(const std::string& quantizer) {
    return QObject::tr("%1: not applicable. The operand does not train with this delayed quantizer, so it has no "
                       "amax history: its what-if figures would be a first step's (scale 1), not a cast the run makes.")
        .arg(QString::fromStdString(quantizer));
}

}  // namespace fp8scope::views
