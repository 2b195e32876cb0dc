// Runs the real fp8scope-engine binary as a user would, capturing exit status, stdout and
// stderr, for the CLI tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fp8scope::testing {

struct EngineResult {
    int status = -1;
    std::string out, err;
};

// A per-process scratch folder under the system temp dir.
inline std::filesystem::path scratch_dir(const std::string& name) {
    std::filesystem::path d = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
}

inline std::string read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// `args` after the binary's name, e.g. "train --steps 3"; stderr goes through a file in
// `scratch` so both streams are kept whole. `env`: "NAME=value ..." set for the engine.
// `shell_setup`: shell commands run first in the engine's shell (limits, traps).
inline EngineResult run_engine(const std::string& args, const std::filesystem::path& scratch,
                               const std::string& env = "", const std::string& shell_setup = "") {
    const std::filesystem::path err = scratch / "stderr.txt";
    const std::string cmd = shell_setup + (env.empty() ? "" : "env " + env + " ") + std::string(FP8SCOPE_ENGINE) +
                            " " + args + " 2>" + err.string();
    EngineResult r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = read_bytes(err);
    return r;
}

// As run_engine, with every file the engine writes limited to `bytes` (RLIMIT_FSIZE) and
// SIGXFSZ ignored: a write past the limit then fails as it does on a full disk.
inline EngineResult run_engine_with_file_limit(const std::string& args, const std::filesystem::path& scratch,
                                               long bytes) {
    const std::string limit = std::to_string(bytes);
    return run_engine(args, scratch, "", "trap '' XFSZ; prlimit --fsize=" + limit + ":" + limit + " ");
}

// Each argument quoted for the shell, so any bytes (a non-UTF-8 file name) reach the
// engine as they are.
inline EngineResult run_engine(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
    std::string line;
    for (const auto& a : args) {
        line += line.empty() ? "'" : " '";
        for (char c : a) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
        line += '\'';
    }
    return run_engine(line, scratch);
}

}  // namespace fp8scope::testing
