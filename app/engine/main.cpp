// fp8scope-engine: the headless side of fp8scope (no Qt). Runs anywhere the numerics
// core builds, GPU servers included.
#include "commands.h"

int main(int argc, char** argv) {
    CLI::App app{"fp8scope-engine: FP8 numerics analysis and training engine"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "fp8scope-engine 0.1.0");
    int exit_code = 0;
    fp8scope::cli::add_analyze(app, exit_code);
    fp8scope::cli::add_devices(app, exit_code);
    fp8scope::cli::add_train(app, exit_code);
    CLI11_PARSE(app, argc, argv);
    return exit_code;
}
