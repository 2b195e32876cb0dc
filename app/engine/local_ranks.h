// `--nproc-per-node N` on one machine, as torchrun does it: this process becomes rank 0 of
// N and starts ranks 1..N-1 as copies of itself (the same command line without
// --nproc-per-node), each with the variables a launcher sets: RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1 unless set) and MASTER_PORT (a
// free port unless set).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace fp8scope::cli {

// The ranks started here learn the launcher's process id: when rank 0 (this process) is
// lost, the surviving ranks stop it if it is still there (stopped or hung).
constexpr const char* kLauncherPidVar = "FP8SCOPE_LAUNCHER_PID";

// The engine's own command line (main() records it), for starting copies of itself.
void set_command_line(int argc, char** argv);
const std::vector<std::string>& command_line();

// Why `n` CPU ranks are too many for this machine ("" when they fit): CPU ranks take turns
// on its cores, at most twice as many as the cores this process may run on, or 8 on a
// smaller machine; past that they only wait for each other.
std::string cpu_ranks_refused(int n);

class LocalRanks {
public:
    // Sets this process's variables as rank 0 and starts the others. Throws
    // std::runtime_error naming what failed. `restarts`: how many times restart() may
    // start each rank again.
    explicit LocalRanks(int nproc, int restarts = 0);
    ~LocalRanks();  // a rank still running when this one leaves is stopped (killed if it hangs)
    LocalRanks(const LocalRanks&) = delete;
    LocalRanks& operator=(const LocalRanks&) = delete;

    // Waits for ranks 1..N-1 and returns the highest exit status among them and `mine`
    // (a rank ended by a signal counts as 1). The `lost` ranks, which an elastic job went
    // on without, are killed (one may hang or be stopped) and do not count.
    int wait(int mine, const std::vector<int>& lost = {});
    // Starts `rank` again with the variables it was started with (its old process killed
    // first: it may be stopped or hung), within the restarts allowed; false past them. A
    // message on stderr says which.
    bool restart(int rank);

private:
    std::vector<pid_t> children_;
    std::vector<int> restarts_;  // per rank: restarts left
    pid_t spawn(int rank);
};

}  // namespace fp8scope::cli
