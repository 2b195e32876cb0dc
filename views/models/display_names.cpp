// Labels of trace ids.
#include "models/display_names.h"

#include <algorithm>

namespace fp8scope::views {

namespace {
QString from_list(const std::vector<std::string>& names, int id, const char* what) {
    if (id >= 0 && id < static_cast<int>(names.size())) return QString::fromStdString(names[id]);
    return id < 0 ? QStringLiteral("-") : QStringLiteral("%1 #%2").arg(what).arg(id);
}
}  // namespace

QString gemm_label(Gemm g) { return QString::fromLatin1(gemm_name(g)); }
QString operand_label(Operand o) { return QString::fromLatin1(operand_name(o)); }

QString linear_label(const trace::TraceMeta& meta, int linear) {
    if (linear >= 0 && linear < static_cast<int>(meta.linears.size()))
        return QString::fromStdString(meta.linears[linear].name);
    return linear < 0 ? QStringLiteral("-") : QStringLiteral("linear #%1").arg(linear);
}

QString operand_ref_label(const trace::TraceMeta& meta, const OperandRef& ref) {
    return QStringLiteral("%1 %2 %3").arg(linear_label(meta, ref.linear), gemm_label(ref.gemm),
                                          operand_label(ref.operand));
}

QString short_operand_label(const trace::TraceMeta& meta, const OperandRef& ref) {
    if (ref.linear < 0 || ref.linear >= static_cast<int>(meta.linears.size())) return operand_ref_label(meta, ref);
    const auto& l = meta.linears[ref.linear];
    const QString name = QString::fromStdString(l.name);
    return QStringLiteral("L%1 %2 %3 %4").arg(l.layer).arg(name.section('.', -1), gemm_label(ref.gemm),
                                               operand_label(ref.operand));
}

QString run_label(const trace::TraceMeta& meta, int run) {
    if (run >= 0 && run < static_cast<int>(meta.runs.size()))
        return QString::fromStdString(meta.runs[run].name);
    return QStringLiteral("run #%1").arg(run);
}

std::string switched_run_name(const std::string& started_as, const std::vector<trace::EventRecord>& events, int run) {
    std::vector<const trace::EventRecord*> switches;
    for (const auto& e : events)
        if (e.kind == trace::EventKind::RecipeSwitch && (e.run == run || e.run == -1)) switches.push_back(&e);
    std::stable_sort(switches.begin(), switches.end(), [](auto* a, auto* b) { return a->step < b->step; });
    std::string name = started_as;
    for (const trace::EventRecord* e : switches) {
        const std::string& d = e->detail;
        const auto arrow = d.find(" -> ");
        name += " \u2192 " + (arrow == std::string::npos ? d : d.substr(arrow + 4)) + " @ step " + std::to_string(e->step);
    }
    return name;
}

QString event_run_label(const trace::TraceMeta& meta, int run) {
    return run == -1 ? QStringLiteral("all runs") : run_label(meta, run);
}

QString quantizer_label(const trace::TraceMeta& meta, int quantizer) {
    return from_list(meta.quantizers, quantizer, "quantizer");
}
QStringList quantizer_labels(const trace::TraceMeta& meta) {
    QStringList out;
    for (std::size_t q = 0; q < meta.quantizers.size(); ++q) out << quantizer_label(meta, static_cast<int>(q));
    return out;
}

QString training_recipe_label(const trace::TraceMeta& meta, int recipe) {
    return from_list(meta.training_recipes, recipe, "recipe");
}
QString op_label(const trace::TraceMeta& meta, int op) { return from_list(meta.ops, op, "op"); }

std::vector<OperandRef> all_operands(int n_linears) {
    std::vector<OperandRef> out;
    for (int l = 0; l < n_linears; ++l)
        for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
            for (Operand o : {Operand::X, Operand::W, Operand::DY})
                if (trace::operand_slot(l, g, o) >= 0) out.push_back({l, g, o});
    std::sort(out.begin(), out.end(), slot_order);
    return out;
}

std::vector<OperandRef> parse_operand_list(const trace::TraceMeta& meta, const QString& list, QStringList* unknown) {
    const std::vector<OperandRef> all = all_operands(static_cast<int>(meta.linears.size()));
    std::vector<OperandRef> out;
    for (const QString& item : list.split(',', Qt::SkipEmptyParts)) {
        const QString name = item.simplified();
        if (name.isEmpty()) continue;
        auto it = all.end();
        for (const QString& alt : gemm_alternatives(name)) {
            it = std::find_if(all.begin(), all.end(), [&](const OperandRef& r) {
                return alt.compare(operand_ref_label(meta, r), Qt::CaseInsensitive) == 0 ||
                       alt.compare(short_operand_label(meta, r), Qt::CaseInsensitive) == 0;
            });
            if (it != all.end()) break;
        }
        if (it != all.end()) out.push_back(*it);
        else if (unknown) unknown->push_back(name);
    }
    return out;
}

QStringList gemm_alternatives(const QString& label) {
    QStringList words = label.simplified().split(' ');
    if (words.size() < 3 || !words[words.size() - 2].contains('+')) return {words.join(' ')};
    QStringList out;
    for (const QString& gemm : words[words.size() - 2].split('+', Qt::SkipEmptyParts)) {
        words[words.size() - 2] = gemm;
        out << words.join(' ');
    }
    return out;
}

}  // namespace fp8scope::views
