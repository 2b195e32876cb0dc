// Help > Keyboard shortcuts and Help > About.
#pragma once

class QWidget;

// Where the documentation lives: the project's README.
inline constexpr const char* kDocsAddress = "https://github.com/fp8scope/fp8scope#readme";

// Every shortcut of `window`'s menus and the step keys, in a table.
void show_shortcuts(QWidget* window);
void show_about(QWidget* window);
