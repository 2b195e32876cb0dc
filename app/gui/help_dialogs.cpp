// Help dialogs. The shortcut list is read from the window's actions, so it cannot drift
// from the menus.
#include "help_dialogs.h"

#include <QAction>
#include <QDialog>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QMessageBox>
#include <QUrl>
#include <QTableWidget>
#include <QVBoxLayout>

#include "models/step_keys.h"

#ifndef FP8SCOPE_VERSION
#define FP8SCOPE_VERSION "unknown"
#endif

void show_shortcuts(QWidget* window) {
    std::vector<std::pair<QString, QString>> rows;
    for (const auto& k : fp8scope::views::StepKeys::keys()) rows.push_back({k.keys.toString(QKeySequence::NativeText), k.what});
    for (QAction* a : window->findChildren<QAction*>())
        if (!a->shortcut().isEmpty())
            rows.push_back({a->shortcut().toString(QKeySequence::NativeText), a->text().remove('&').remove("...")});
    QDialog d(window);
    d.setWindowTitle(QObject::tr("Keyboard shortcuts"));
    auto* table = new QTableWidget(static_cast<int>(rows.size()), 2, &d);
    table->setHorizontalHeaderLabels({QObject::tr("key"), QObject::tr("does")});
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
        table->setItem(i, 0, new QTableWidgetItem(rows[i].first));
        table->setItem(i, 1, new QTableWidgetItem(rows[i].second));
    }
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->verticalHeader()->hide();
    table->horizontalHeader()->setStretchLastSection(true);
    table->resizeColumnsToContents();
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, &d);
    QObject::connect(buttons, &QDialogButtonBox::rejected, &d, &QDialog::reject);
    auto* layout = new QVBoxLayout(&d);
    layout->addWidget(table);
    layout->addWidget(buttons);
    d.resize(420, 360);
    d.exec();
}

void show_about(QWidget* window) {
    QMessageBox::about(window, QObject::tr("About fp8scope"),
                       QObject::tr("<h3>fp8scope %1</h3><p>Profiler and numerics inspector for FP8 training.</p>"
                                   "<p>Documentation: <a href=\"%2\">%3</a></p><p>License: GPLv3.</p>")
                           .arg(FP8SCOPE_VERSION, QUrl::fromLocalFile(kDocsPath).toString(), kDocsPath));
}
