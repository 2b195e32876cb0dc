// Attach to a running engine: its local socket path or host:port, and the token a TCP
// engine prints at start (empty for a local socket).
#pragma once

#include <QDialog>

class QLineEdit;

class AttachDialog : public QDialog {
    Q_OBJECT
public:
    explicit AttachDialog(QWidget* parent = nullptr);
    // "unix:PATH" for a path, the text as typed otherwise (parsed by the live client).
    QString endpoint() const;
    QString token() const;

private:
    QLineEdit *endpoint_, *token_;
};
