// Labels of trace ids for display: names from the trace's metadata, with a readable
// fallback when an id is out of range (a damaged or newer trace must not crash a view).
#pragma once

#include <QString>
#include <QStringList>
#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

QString gemm_label(Gemm g);
QString operand_label(Operand o);
QString operand_ref_label(const trace::TraceMeta& meta, const OperandRef& ref);  // "blocks.0.mlp.fc1 fprop x"
// For legends where several operands share a plot: layer and the linear's last name part.
QString short_operand_label(const trace::TraceMeta& meta, const OperandRef& ref);  // "L0 fc1 fprop x"
QString linear_label(const trace::TraceMeta& meta, int linear);
QString run_label(const trace::TraceMeta& meta, int run);
// The name a run goes by after the recipe switches among `events` (kind recipe_switch,
// detail "from -> to", of this run or of all runs): "baseline → mxfp8 @ step 40", a
// link per switch in step order; `started_as` when it never switched.
std::string switched_run_name(const std::string& started_as, const std::vector<trace::EventRecord>& events, int run);
// The run an event belongs to: its name, or "all runs" for an event of the whole
// lock-step comparison (run -1).
QString event_run_label(const trace::TraceMeta& meta, int run);
QString quantizer_label(const trace::TraceMeta& meta, int quantizer);  // analysis quantizers
QStringList quantizer_labels(const trace::TraceMeta& meta);            // all of them, in id order
QString training_recipe_label(const trace::TraceMeta& meta, int recipe);
QString op_label(const trace::TraceMeta& meta, int op);

// Every operand of linears [0, n) in slot order.
std::vector<OperandRef> all_operands(int n_linears);
// The operands named in a comma-separated list of labels, long or short, in any case
// ("blocks.0.mlp.fc1 fprop x, L1 fc1 fprop x"), also as the Layers table writes a tensor
// cast once for two GEMMs ("L0 qkv dgrad+wgrad dy": the first GEMM's operand). Names that
// match nothing go to `unknown`.
std::vector<OperandRef> parse_operand_list(const trace::TraceMeta& meta, const QString& list, QStringList* unknown);
// The labels a label with GEMMs joined by '+' stands for, in its order ("L0 qkv dgrad dy",
// "L0 qkv wgrad dy"); any other label as it is. Simplified (single spaces).
QStringList gemm_alternatives(const QString& label);

}  // namespace fp8scope::views
