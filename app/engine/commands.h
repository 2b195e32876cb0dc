// Subcommands of fp8scope-engine. Each registers itself on the CLI and, when chosen,
// runs and stores its process exit code in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

namespace fp8scope::cli {

void add_analyze(CLI::App& app, int& exit_code);
void add_compact(CLI::App& app, int& exit_code);
void add_devices(CLI::App& app, int& exit_code);
void add_diagnose(CLI::App& app, int& exit_code);
void add_train(CLI::App& app, int& exit_code);
void add_export(CLI::App& app, int& exit_code);
void add_import(CLI::App& app, int& exit_code);
void add_inspect(CLI::App& app, int& exit_code);
void add_preflight(CLI::App& app, int& exit_code);
void add_attribute(CLI::App& app, int& exit_code);

}  // namespace fp8scope::cli
