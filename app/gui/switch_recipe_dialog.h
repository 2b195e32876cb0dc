// Switch the training recipe of one replica of a live run, or of every replica.
#pragma once

#include <QDialog>

class QComboBox;

class SwitchRecipeDialog : public QDialog {
    Q_OBJECT
public:
    // `runs`: replica names; `recipes`: the training recipes the engine knows.
    SwitchRecipeDialog(const QStringList& runs, const QStringList& recipes, QWidget* parent = nullptr);
    int run() const;  // -1: every replica
    QString recipe() const;

private:
    QComboBox *run_, *recipe_;
};
