// The small TCP rendezvous of a data-parallel job: rank 0 listens on MASTER_PORT (on the
// loopback alone when MASTER_ADDR names it, as for a job on one machine; else on every
// interface), every other rank connects to MASTER_ADDR:MASTER_PORT, retrying until rank 0
// is up. Over these connections rank 0 broadcasts what all ranks must share (NCCL's
// unique id) and gathers one small record per rank (the health checks' timings). Every
// wait is bounded: a rank that never joins, dies or hangs ends the wait with an error
// that names it, on every rank that waited for it.
//
// Wire: frames of a 4-byte little-endian length and that many bytes. Rank 0 greets each
// connection with "fp8scope-rendezvous 6 NONCE0"; the joining rank sends
// "fp8scope-rendezvous 6 WORLD RANK NONCE PROOF", exactly (any other bytes are not a
// hello), PROOF its HMAC of both nonces and its place under the job secret
// (comm/job_secret.h); rank 0 answers "ok PROOF0", its own proof, or "error: why" (not a
// hello, another version, the secret not proven, a rank outside the world, a rank that
// already joined, a different world size). The number after "fp8scope-rendezvous" is the
// version of everything the ranks exchange (kRendezvousVersion: 3 added the FP8 sum
// figures and the scaling digest to the step records, 4 the kind byte that opens every
// later frame and the recovery round of an elastic job, 5 late joins, 6 the roster of the
// ranks' own listening ports and a new hub after rank 0's loss): ranks of different
// versions do not meet, and each side names both versions. Every later frame carries, after
// its bytes, the MAC of its direction, sequence number and bytes under its connection's key: a frame that fails it
// ends the exchange naming the rank it came from. Each such frame's bytes open with its
// kind: data ('D'), and for an elastic job's recovery (agree_world) a fault ('F', rank 0
// to a rank: the world is changing), a rank's recovery record ('R') and the new world
// ('N'); for a late join (admit) the state's parts ('S', the last 'T', to the joiner),
// the joiner's word that it holds it ('A') or why it will not join ('X', either way),
// and the ranks that joined ('J'). Rank 0 reads hellos side by side: a
// connection without a whole hello within a few seconds is closed. A world past
// kMaxWorldSize, or one rank 0's open-file limit cannot hold a connection each of, fails
// before rank 0 listens.
//
// Late joins: rank 0 goes on listening once the job formed. A process started with the
// launcher variables of a rank the job lacks (a lost rank's replacement) is answered
// "late PROOF0" by an elastic job and waits until the job admits it at a step boundary
// (admit); a job that is not elastic answers "error: ..." saying so. Only a hello that
// proves the job's secret gets either answer. A thread of rank 0's reads these hellos.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "comm/launch_env.h"
#include "util/fd.h"

namespace fp8scope {

constexpr int kRendezvousVersion = 6;

class RendezvousError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A peer was lost in an exchange of an elastic job (Rendezvous::set_elastic), or the job
// began a recovery round: the survivors are to meet in agree_world(). `lost`: the ranks
// this rank saw fail (rank 0 alone sees them; empty elsewhere). The message is the one a
// job that is not elastic ends with.
class WorldFault : public RendezvousError {
public:
    WorldFault(const std::string& what, std::vector<int> lost) : RendezvousError(what), lost_(std::move(lost)) {}
    const std::vector<int>& lost() const { return lost_; }

private:
    std::vector<int> lost_;
};

// Sorted ranks as runs, the first eight of them and how many ranks the rest hold ("1-3,
// 7, 9-12 and 40 more"): a message naming ranks stays one short line at any world size.
std::string rank_list(const std::vector<int>& ranks);

// A loopback TCP port nobody listens on now: a MASTER_PORT for a job on one machine (rank
// 0 binds it a moment later). Throws RendezvousError.
int free_loopback_port();

// One rank's connection after the hello: its frames' key and sequence numbers.
struct RendezvousLink {
    Fd fd;
    std::string key;
    std::uint64_t sent = 0, received = 0;
};

// What rank 0 reads in a joining rank's hello (the frame's bytes): the rank, its nonce and
// its link's key, or rank -1 and the error to answer. The hello must be exactly what a
// rank writes: no sign, leading zero, other spacing, trailing byte or uppercase hex.
struct JoiningHello {
    int rank = -1;
    std::string nonce, key, error;
};
JoiningHello check_hello(const std::string& hello, int world_size, const std::string& secret, const std::string& nonce0);

class Rendezvous {
public:
    // Joins the job of `env` (returns once every rank has joined); `timeout` bounds the
    // joining and every later exchange. A job of one needs no socket. Throws
    // RendezvousError.
    Rendezvous(const LaunchEnv& env, std::chrono::milliseconds timeout);
    ~Rendezvous();
    Rendezvous(const Rendezvous&) = delete;
    Rendezvous& operator=(const Rendezvous&) = delete;

    int rank() const { return env_.rank; }
    // The bound of every later exchange (training steps need more than joining).
    void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
    std::chrono::milliseconds timeout() const { return timeout_; }
    int world_size() const { return env_.world_size; }

    // Rank 0's `blob` on every rank (other ranks' argument is ignored).
    std::string broadcast(std::string_view blob);
    // Every rank's `mine`, in rank order, on every rank.
    std::vector<std::string> all_gather(std::string_view mine);
    // all_gather of an array every rank sends with the same size (a collective's operand):
    // throws RendezvousError naming `what` and the first rank whose size differs from this
    // rank's, on every rank.
    std::vector<std::string> all_gather_same_size(std::string_view mine, std::string_view what);
    void barrier() { all_gather({}); }

    // Every rank calls it with the same sorted list of ranks to drop (never rank 0, the
    // hub): the remaining ranks form a job of their own, renumbered in order (rank 3 of 4
    // without rank 1 becomes rank 2 of 3). Returns false on a dropped rank, which then
    // belongs to no job. Throws std::invalid_argument on rank 0 or a rank outside the job.
    bool exclude(const std::vector<int>& ranks);
    const LaunchEnv& env() const { return env_; }
    // The rank each rank of the job now had when the job was launched (exclude() drops and
    // renumbers ranks).
    const std::vector<int>& launch_ranks() const { return launch_ranks_; }

    // Elastic, once on every rank as the job starts (a collective): every rank but rank 0
    // listens on a port of its own, and rank 0 tells every rank the roster of these
    // addresses (each rank's as rank 0 sees it), so the survivors of rank 0 can meet again.
    void share_roster();
    // Per rank as launched: "host port" of its listener (empty: none known, or rank 0).
    const std::vector<std::string>& roster() const { return roster_; }

    // Elastic: rank 0 throws WorldFault, naming the rank, when one is lost in an exchange,
    // and the other ranks wait twice the timeout for rank 0 (so rank 0 names a lost rank
    // before they give up on it), throwing WorldFault when rank 0 sends a fault frame.
    void set_elastic(bool on) { elastic_ = on; }
    bool elastic() const { return elastic_; }

    // The recovery round of an elastic job, which every surviving rank enters after a
    // WorldFault or another failure of a collective, with its record (`mine`) and the ranks
    // it saw fail (`lost`, WorldFault::lost). Rank 0 tells every rank a fault frame, then
    // takes each rank's record (skipping the data frames an exchange left behind) within
    // the timeout: a rank that sends none in time, or whose connection fails, is lost.
    // Every survivor gets the lost ranks and the survivors' records in rank order, and the
    // job goes on without the lost ranks (exclude()). Bounded: rank 0 waits the timeout, the
    // others three times it. When rank 0 itself is lost (its connection fails or it sends
    // nothing in time), the survivors first elect a new hub: the lowest surviving rank as
    // launched, which the others reach at its roster address (share_roster) with the hello
    // and the job's secret, each candidate within twice the timeout; the new hub waits for
    // the ranks above it (twice the timeout per candidate before it, and twice more), then
    // runs the round as rank 0 did. A rank that joined late holds no roster and cannot take
    // part. Throws RendezvousError when the round finds no rank lost, or when fewer than a
    // majority of the ranks before the election meet again (the would-be hub is then rank 0
    // of a job of one, and writes what rank 0 would: two groups never both train).
    struct NewWorld {
        std::vector<int> lost;              // in the old numbering, sorted (0: rank 0, the old hub)
        std::vector<std::string> records;   // the survivors', in their new rank order
        int old_world = 1;
    };
    NewWorld agree_world(const std::string& mine, const std::vector<int>& lost);

    // Late joins of an elastic job. Rank 0: the launch ranks of the processes waiting to
    // join that the job lacks now (sorted). One waiting for a rank the job holds (a
    // second process with the same RANK) is refused once it has waited the timeout.
    std::vector<int> joiners_due();
    // Every rank at the same step boundary, with the same `ranks` (rank 0's joiners_due(),
    // agreed in the step's exchange). Rank 0 sends each joiner `state()` (called once, only
    // when a joiner waits) and takes its word that it holds it, all within the timeout; a
    // joiner that fails, refuses or is too slow is dropped and the job stays as it was
    // without it. Then every rank learns who joined and the job takes them in, its ranks
    // numbered by launch rank again (a joiner slots in where its launch rank falls: ranks
    // 0, 1, 3 and a returning 2 are 0, 1, 2, 3). Non-zero ranks wait three times the timeout.
    // Throws WorldFault when a rank of the job is lost meanwhile (rank 0 then tells it only
    // after every rank has the new world).
    struct Admission {
        std::vector<int> joined;                          // launch ranks, sorted
        std::vector<std::pair<int, std::string>> failed;  // launch rank, why
        int old_world = 1;
    };
    Admission admit(const std::vector<int>& ranks, const std::function<std::string()>& state);
    // The joining process: late() after the constructor when rank 0 answered "late". It
    // waits for the job's state (at most four times the timeout: until the next step
    // boundary), then either says it holds it and waits to be taken in (late_ready(): then
    // rank() and world_size() are its place in the job), or says why not (late_refuse()).
    bool late() const { return late_; }
    std::string late_state();
    void late_ready();
    void late_refuse(const std::string& why);

private:
    // Rank 0's thread that answers hellos after the job formed (see the file's comment).
    void serve_late_hellos();
    struct Candidate {
        int rank = -1;  // as launched
        RendezvousLink link;
        std::chrono::steady_clock::time_point since;
    };
    // After rank 0's loss: the survivors meet at the lowest rank that answers (see
    // agree_world); returns the ranks, in the numbering it leaves, that did not come.
    std::vector<int> elect_hub();
    // Takes the joiners' list from rank 0 (a 'J' frame's bytes) and renumbers the job.
    void take_in(const std::vector<int>& joined, std::vector<Candidate>* links);
    std::string recv_data(int peer, std::chrono::steady_clock::time_point deadline);
    void send_data(int peer, std::string_view data, std::chrono::steady_clock::time_point deadline);
    std::atomic<bool> elastic_{false};
    std::vector<int> launch_ranks_;
    int launch_world_ = 1;
    std::string secret_;
    bool late_ = false;
    Fd listener_;  // rank 0
    std::thread late_hellos_;
    std::atomic<bool> closing_{false};
    std::mutex candidates_mu_;
    std::vector<Candidate> candidates_;  // authenticated, waiting for a step boundary
    std::vector<std::string> recovering_;  // rank 0: a rank's record that came during an exchange (index: rank)
    std::vector<bool> has_record_;
    Fd own_listener_;                  // share_roster: where this rank takes the others if it becomes the hub
    std::vector<std::string> roster_;  // per launch rank: "host port" of its listener (empty: none known)
    bool hub_lost_ = false;            // this rank's link to rank 0 failed

    LaunchEnv env_;
    std::chrono::milliseconds timeout_;
    std::vector<RendezvousLink> peers_;  // rank 0: one per rank (index 0 unused); others: [0] = rank 0
};

}  // namespace fp8scope
