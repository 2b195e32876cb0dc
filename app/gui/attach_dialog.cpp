// Attach dialog; remembers the last endpoint (never the token).
#include "attach_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QSettings>

AttachDialog::AttachDialog(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Attach to engine"));
    endpoint_ = new QLineEdit(QSettings().value("attach/endpoint").toString(), this);
    endpoint_->setPlaceholderText(tr("/run/user/1000/fp8scope/engine-42.sock or gpubox:7878"));
    endpoint_->setMinimumWidth(360);
    token_ = new QLineEdit(this);
    token_->setEchoMode(QLineEdit::Password);
    token_->setPlaceholderText(tr("printed by the engine; not needed for a local socket"));
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (endpoint_->text().trimmed().isEmpty()) return;
        QSettings().setValue("attach/endpoint", endpoint_->text().trimmed());
        accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* form = new QFormLayout(this);
    form->addRow(tr("Socket or host:port"), endpoint_);
    form->addRow(tr("Token"), token_);
    form->addRow(buttons);
}

QString AttachDialog::endpoint() const {
    const QString t = endpoint_->text().trimmed();
    return t.startsWith('/') ? "unix:" + t : t;
}

QString AttachDialog::token() const { return token_->text(); }
