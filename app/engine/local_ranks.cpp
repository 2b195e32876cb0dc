#include "local_ranks.h"

#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "comm/job_secret.h"
#include "comm/rendezvous.h"

extern char** environ;

namespace fp8scope::cli {

std::string cpu_ranks_refused(int n) {
    cpu_set_t cores;
    if (::sched_getaffinity(0, sizeof cores, &cores) != 0) return {};
    const int limit = std::max(8, 2 * CPU_COUNT(&cores));
    if (n <= limit) return {};
    return std::to_string(n) + " CPU ranks on this machine are past the " + std::to_string(limit) +
           " it takes: twice the cores this process may run on (" + std::to_string(CPU_COUNT(&cores)) +
           "), and 8 at least";
}
namespace {

std::vector<std::string> g_command_line;

// The command line without --nproc-per-node and its value.
std::vector<std::string> child_arguments() {
    std::vector<std::string> out;
    const auto& in = g_command_line;
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] == "--nproc-per-node") {
            ++i;
            continue;
        }
        if (in[i].rfind("--nproc-per-node=", 0) == 0) continue;
        out.push_back(in[i]);
    }
    return out;
}

void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

}  // namespace

void set_command_line(int argc, char** argv) { g_command_line.assign(argv, argv + argc); }
const std::vector<std::string>& command_line() { return g_command_line; }

LocalRanks::LocalRanks(int nproc, int restarts) : restarts_(std::size_t(nproc), restarts) {
    if (!std::getenv("MASTER_ADDR")) set("MASTER_ADDR", "127.0.0.1");
    if (!std::getenv("MASTER_PORT")) set("MASTER_PORT", std::to_string(free_loopback_port()));
    // Only the processes started here hold the secret: nothing else on the machine joins.
    if (!std::getenv(kJobSecretVar)) set(kJobSecretVar, to_hex(random_bytes(32)));
    set("WORLD_SIZE", std::to_string(nproc));
    set("LOCAL_WORLD_SIZE", std::to_string(nproc));
    set(kLauncherPidVar, std::to_string(::getpid()));
    set("RANK", "0");
    set("LOCAL_RANK", "0");
    for (int r = 1; r < nproc; ++r) children_.push_back(spawn(r));
}

// Rank `rank` with this process's environment but its own RANK and LOCAL_RANK (built
// here, not set: the training thread's restarts run beside other threads).
pid_t LocalRanks::spawn(int rank) {
    std::vector<std::string> args = child_arguments(), env;
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "RANK=", 5) != 0 && std::strncmp(*e, "LOCAL_RANK=", 11) != 0) env.push_back(*e);
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0) throw std::runtime_error("cannot start rank " + std::to_string(rank) + ": " + std::strerror(rc));
    return pid;
}

bool LocalRanks::restart(int rank) {
    if (rank < 1 || std::size_t(rank) > children_.size() || restarts_[std::size_t(rank)] <= 0) return false;
    --restarts_[std::size_t(rank)];
    pid_t& pid = children_[std::size_t(rank) - 1];
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    try {
        pid = spawn(rank);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: %s\n", e.what());
        pid = -1;
        return false;
    }
    std::fprintf(stderr, "fp8scope-engine: started rank %d again (--restart-lost-ranks; %d restart(s) left); it "
                         "joins at a step boundary\n", rank, restarts_[std::size_t(rank)]);
    return true;
}

LocalRanks::~LocalRanks() {
    // SIGTERM stops a rank between steps (its trace ends cleanly); a rank that does not
    // leave within 10 s (hung) is killed.
    std::erase(children_, pid_t(-1));
    for (pid_t pid : children_) ::kill(pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (pid_t pid : children_) {
        while (::waitpid(pid, nullptr, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() >= deadline) {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, nullptr, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
}

int LocalRanks::wait(int mine, const std::vector<int>& lost) {
    int worst = mine;
    for (std::size_t i = 0; i < children_.size(); ++i) {
        const pid_t pid = children_[i];
        if (pid < 0) continue;  // a restart that could not start it
        const bool gone = std::find(lost.begin(), lost.end(), int(i) + 1) != lost.end();
        if (gone) ::kill(pid, SIGKILL);
        int st = 0;
        while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (!gone) worst = std::max(worst, WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
    children_.clear();
    return worst;
}

}  // namespace fp8scope::cli
