// File dialogs and writers behind File > Export: a view as PNG/PDF, a view's table as
// CSV, the kernel timeline as Chrome/Perfetto JSON. Failures come back as a message.
#pragma once

#include <QString>
#include <vector>

#include "models/series_store.h"
#include "widgets/store_view.h"

class QWidget;

QString export_view_image(QWidget* parent, const fp8scope::views::StoreView& view);
QString export_view_table(QWidget* parent, const fp8scope::views::StoreView& view);
// With counters of the loss, the learning rate and the amax and scale of `operands`.
QString export_timeline(QWidget* parent, const fp8scope::views::SeriesStore& store, int run,
                        const std::vector<fp8scope::views::OperandRef>& operands = {});
