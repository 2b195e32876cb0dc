// fp8scope-engine: the headless side of fp8scope (no Qt). Runs anywhere the numerics
// core builds, GPU servers included.
#include "commands.h"
#include "local_ranks.h"
#include "cpu/cpu_backend.h"
#include "version.h"

int main(int argc, char** argv) {
    CLI::App app{"fp8scope-engine: FP8 numerics analysis and training engine"};
    app.require_subcommand(1);
    // Every usage error, CLI11's own included, says what it is as the engine's other errors do.
    app.failure_message([](const CLI::App* a, const CLI::Error& e) {
        return "fp8scope-engine: error: " + CLI::FailureMessage::simple(a, e);
    });
    app.set_version_flag("--version", [] {
        return std::string("fp8scope-engine ") + fp8scope::cli::kEngineVersion + "\n" + fp8scope::cpu_description();
    });
    fp8scope::cli::set_command_line(argc, argv);
    int exit_code = 0;
    fp8scope::cli::add_analyze(app, exit_code);
    fp8scope::cli::add_compact(app, exit_code);
    fp8scope::cli::add_devices(app, exit_code);
    fp8scope::cli::add_train(app, exit_code);
    fp8scope::cli::add_export(app, exit_code);
    fp8scope::cli::add_import(app, exit_code);
    fp8scope::cli::add_inspect(app, exit_code);
    fp8scope::cli::add_diagnose(app, exit_code);
    fp8scope::cli::add_preflight(app, exit_code);
    fp8scope::cli::add_attribute(app, exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help and --version exit 0; every usage error exits 2.
        return app.exit(e) == 0 ? 0 : 2;
    }
    return exit_code;
}
