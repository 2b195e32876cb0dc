// Where this process sits in a data-parallel job, read from what the launcher sets:
// torchrun and other elastic launchers (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
// _LOCAL_SIZE) and PMI launchers such as MPICH's and Slurm's (PMI_RANK, PMI_SIZE). Without
// any of them the process is a job of one. MPI launchers do not name a rendezvous address:
// MASTER_ADDR and MASTER_PORT then default to this host and 29500, right for one machine.
// Every rank of a job of more than one needs the job's secret, FP8SCOPE_JOB_SECRET (hex,
// at least 128 bits, the same on every rank): only processes that hold it join.
#pragma once

#include <functional>
#include <string>

namespace fp8scope {

// The most ranks a job may have: rank 0 is the rendezvous's hub, holding a connection
// per rank and relaying every rank's record of a step to every rank (world size squared
// frames per exchange), which past a few thousand ranks outlasts any step.
constexpr int kMaxWorldSize = 4096;

struct LaunchEnv {
    int rank = 0, world_size = 1;
    int local_rank = 0, local_world_size = 1;  // on this machine
    std::string master_addr = "127.0.0.1";     // rank 0's rendezvous address
    int master_port = 29500;
    std::string launcher = "none";  // "torchrun", "Open MPI", "PMI", "none"
    std::string job_secret;         // FP8SCOPE_JOB_SECRET's bytes (comm/job_secret.h)

    bool distributed() const { return world_size > 1; }
    std::string describe() const;  // "rank 3 of 8 (local 3 of 4), rendezvous 10.0.0.1:29500, torchrun"
};

// From `getenv` (returns null for an unset variable). Throws std::invalid_argument naming
// the variable and its value: not a number, a rank outside the world, a world size past
// kMaxWorldSize, a port outside 1..65535, a world size given without a rank, a job of
// more than one rank without FP8SCOPE_JOB_SECRET or with one of fewer than 128 bits.
LaunchEnv launch_env_from(const std::function<const char*(const char*)>& getenv);
LaunchEnv launch_env();  // from this process's environment

}  // namespace fp8scope
