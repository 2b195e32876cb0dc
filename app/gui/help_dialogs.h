// Help > Keyboard shortcuts and Help > About.
#pragma once

class QWidget;

// Where the documentation lives: the README of the source tree this build came from.
inline constexpr const char* kDocsPath = FP8SCOPE_DOCS;

// Every shortcut of `window`'s menus and the step keys, in a table.
void show_shortcuts(QWidget* window);
void show_about(QWidget* window);
