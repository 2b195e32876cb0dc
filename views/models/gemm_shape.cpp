// GEMM shapes from linears and the step's tokens.
#include "models/gemm_shape.h"

#include <QJsonDocument>
#include <QJsonObject>

namespace fp8scope::views {

QString GemmShape::label() const { return QStringLiteral("%1x%2x%3").arg(m).arg(n).arg(k); }

std::int64_t step_tokens(const trace::TraceMeta& meta) {
    const QJsonObject c = QJsonDocument::fromJson(QByteArray::fromStdString(meta.config_json)).object();
    return static_cast<std::int64_t>(c.value("batch_size").toDouble()) * static_cast<std::int64_t>(c.value("seq_len").toDouble());
}

std::optional<GemmShape> gemm_shape(const trace::TraceMeta& meta, const trace::OpRecord& r, std::int64_t tokens) {
    if (tokens <= 0 || r.linear < 0 || r.linear >= static_cast<int>(meta.linears.size())) return {};
    if (r.parent < 0 || r.parent >= static_cast<int>(meta.ops.size())) return {};
    const auto& l = meta.linears[static_cast<std::size_t>(r.linear)];
    const std::string& op = meta.ops[static_cast<std::size_t>(r.parent)];
    if (op == "fprop") return GemmShape{tokens, l.out_features, l.in_features};
    if (op == "dgrad") return GemmShape{tokens, l.in_features, l.out_features};
    if (op == "wgrad") return GemmShape{l.out_features, l.in_features, tokens};
    return {};
}

}  // namespace fp8scope::views
