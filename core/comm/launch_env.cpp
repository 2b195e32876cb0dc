#include "comm/launch_env.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

#include "comm/job_secret.h"

namespace fp8scope {
namespace {

using Getenv = std::function<const char*(const char*)>;

// The integer in variable `name`, or `fallback` when it is unset; `bound` says why hi.
int int_var(const Getenv& getenv, const char* name, int fallback, int lo, int hi, const char* bound = nullptr) {
    const char* v = getenv(name);
    if (!v) return fallback;
    errno = 0;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || errno == ERANGE || n < lo || n > hi)
        throw std::invalid_argument(std::string(name) + "=" + v + ": expected an integer in [" + std::to_string(lo) +
                                    ", " + std::to_string(hi) + "]" +
                                    (bound ? std::string(" (") + bound + ")" : ""));
    return static_cast<int>(n);
}

struct Names {
    const char *rank, *size, *local_rank, *local_size, *launcher;
};

constexpr Names kLaunchers[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     "Open MPI"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI"},
};

}  // namespace

std::string LaunchEnv::describe() const {
    return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (local " +
           std::to_string(local_rank) + " of " + std::to_string(local_world_size) + "), rendezvous " + master_addr +
           ":" + std::to_string(master_port) + ", " + launcher;
}

LaunchEnv launch_env_from(const Getenv& getenv) {
    LaunchEnv e;
    for (const Names& n : kLaunchers) {
        const bool has_rank = getenv(n.rank) != nullptr, has_size = getenv(n.size) != nullptr;
        if (!has_rank && !has_size) continue;
        if (!has_rank || !has_size)
            throw std::invalid_argument(std::string(has_rank ? n.rank : n.size) + " is set without " +
                                        (has_rank ? n.size : n.rank) + " (" + n.launcher + " sets both)");
        e.launcher = n.launcher;
        e.world_size = int_var(getenv, n.size, 1, 1, kMaxWorldSize,
                               "rank 0 holds a connection per rank and relays every exchange to every rank");
        e.rank = int_var(getenv, n.rank, 0, 0, e.world_size - 1);
        e.local_world_size = int_var(getenv, n.local_size, 1, 1, e.world_size);
        e.local_rank = int_var(getenv, n.local_rank, e.rank % e.local_world_size, 0, e.local_world_size - 1);
        break;
    }
    if (const char* addr = getenv("MASTER_ADDR")) {
        if (!*addr) throw std::invalid_argument("MASTER_ADDR is empty: expected rank 0's host name or address");
        e.master_addr = addr;
    }
    e.master_port = int_var(getenv, "MASTER_PORT", e.master_port, 1, 65535);
    if (const char* secret = getenv(kJobSecretVar)) e.job_secret = parse_job_secret(secret);
    else if (e.distributed())
        throw std::invalid_argument(std::string(kJobSecretVar) + " is not set: every rank of a job of " +
                                    std::to_string(e.world_size) +
                                    " needs the job's secret, the same at least 32 hex digits on every rank (e.g. "
                                    "export " + kJobSecretVar + "=$(openssl rand -hex 16) before torchrun, srun or "
                                    "mpirun -x " + kJobSecretVar + "); --nproc-per-node sets one itself");
    return e;
}

LaunchEnv launch_env() {
    return launch_env_from([](const char* name) { return std::getenv(name); });
}

}  // namespace fp8scope
