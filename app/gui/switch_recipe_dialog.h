// Switch the training recipe of one run of a live run, or of every run.
#pragma once

#include <QDialog>

class QComboBox;

class SwitchRecipeDialog : public QDialog {
    Q_OBJECT
public:
    // `runs`: run names; `recipes`: the training recipes the engine knows.
    SwitchRecipeDialog(const QStringList& runs, const QStringList& recipes, QWidget* parent = nullptr);
    int run() const;  // -1: every run
    QString recipe() const;

private:
    QComboBox *run_, *recipe_;
};
