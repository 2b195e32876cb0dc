// The launcher's environment and the TCP rendezvous of a data-parallel job, with real
// processes: the test process is rank 0, forked children are the other ranks (they report
// through their exit status), all on this machine's loopback.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/job_secret.h"
#include "comm/launch_env.h"
#include "comm/rendezvous.h"

namespace fp8scope {
namespace {

using namespace std::chrono_literals;

// The launcher's variables, with a job secret unless `with_secret` is false.
LaunchEnv env_of(std::map<std::string, std::string> vars, bool with_secret = true) {
    if (with_secret) vars.emplace("FP8SCOPE_JOB_SECRET", "00112233445566778899AABBCCDDEEFF");
    return launch_env_from([&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    });
}

std::string error_of(const std::map<std::string, std::string>& vars, bool with_secret = true) {
    try {
        env_of(vars, with_secret);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

TEST(LaunchEnv, ReadsEachLauncher) {
    const LaunchEnv none = env_of({});
    EXPECT_FALSE(none.distributed());
    EXPECT_EQ(none.launcher, "none");
    EXPECT_EQ(none.master_port, 29500);

    const LaunchEnv t = env_of({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                                {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "1234"}});
    EXPECT_TRUE(t.distributed());
    EXPECT_EQ(t.rank, 5);
    EXPECT_EQ(t.world_size, 8);
    EXPECT_EQ(t.local_rank, 1);
    EXPECT_EQ(t.local_world_size, 4);
    EXPECT_EQ(t.master_addr, "node0");
    EXPECT_EQ(t.master_port, 1234);
    EXPECT_EQ(t.describe(), "rank 5 of 8 (local 1 of 4), rendezvous node0:1234, torchrun");

    const LaunchEnv m = env_of({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
    EXPECT_EQ(m.launcher, "Open MPI");
    EXPECT_EQ(m.rank, 3);
    EXPECT_EQ(m.master_addr, "127.0.0.1");

    const LaunchEnv p = env_of({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}});
    EXPECT_EQ(p.launcher, "PMI");
    EXPECT_EQ(p.rank, 2);
    EXPECT_EQ(p.local_rank, 0);  // no local size given: one rank per machine
}

TEST(LaunchEnv, BadValuesNameTheVariable) {
    EXPECT_NE(error_of({{"RANK", "1"}}).find("RANK is set without WORLD_SIZE"), std::string::npos);
    EXPECT_NE(error_of({{"RANK", "8"}, {"WORLD_SIZE", "8"}}).find("RANK=8"), std::string::npos);
    EXPECT_NE(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK=x"), std::string::npos);
    EXPECT_NE(error_of({{"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000"), std::string::npos);
    EXPECT_NE(error_of({{"MASTER_PORT", "0"}}).find("MASTER_PORT=0"), std::string::npos);
    EXPECT_NE(error_of({{"MASTER_ADDR", ""}}).find("MASTER_ADDR is empty"), std::string::npos);
    EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0"), std::string::npos);
}

TEST(LaunchEnv, AWorldSizePastTheBoundIsRefusedWithTheBound) {
    for (const char* n : {"4097", "1000000", "100000000"}) {
        const std::string e = error_of({{"RANK", "0"}, {"WORLD_SIZE", n}});
        EXPECT_NE(e.find(std::string("WORLD_SIZE=") + n + ": expected an integer in [1, 4096] (rank 0 holds"),
                  std::string::npos)
            << e;
    }
    EXPECT_EQ(env_of({{"RANK", "4095"}, {"WORLD_SIZE", "4096"}}).world_size, 4096);
}

TEST(JobSecret, MacsMatchTheirSpecificationsAndTheSecretIsHexOf128BitsOrMore) {
    // RFC 4231, test case 2.
    EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    // The GCM specification's test case 13 (AES-256, zero key and nonce, nothing to
    // authenticate): a frame's MAC with direction 0 and sequence number 0 on empty bytes.
    EXPECT_EQ(to_hex(frame_mac(std::string(32, '\0'), '\0', 0, "")), "530f8afbc74536b9a963b4f1c4cb738b");
    EXPECT_EQ(to_hex(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}}).job_secret), "00112233445566778899aabbccddeeff");
    const std::string missing = error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}}, false);
    EXPECT_NE(missing.find("FP8SCOPE_JOB_SECRET is not set: every rank of a job of 2 needs the job's secret"),
              std::string::npos) << missing;
    EXPECT_EQ(error_of({}, false), "");  // a job of one needs none
    for (const char* bad : {"00112233445566778899aabbccddee", "00112233445566778899aabbccddeeffg",
                            "00112233445566778899aabbccddeefg", ""}) {
        const std::string e = error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"FP8SCOPE_JOB_SECRET", bad}}, false);
        EXPECT_NE(e.find("FP8SCOPE_JOB_SECRET: expected at least 32 hex digits"), std::string::npos) << bad;
        EXPECT_EQ(e.find(bad[0] ? bad : "\x01"), std::string::npos) << "the value is never echoed";
    }
}

TEST(Rendezvous, RankListsAreRunsAndAtMostEightOfThem) {
    EXPECT_EQ(rank_list({}), "");
    EXPECT_EQ(rank_list({5}), "5");
    EXPECT_EQ(rank_list({1, 2, 3, 7, 9, 10}), "1-3, 7, 9-10");
    std::vector<int> every_other;
    for (int r = 1; r < 40; r += 2) every_other.push_back(r);  // 20 runs of one
    EXPECT_EQ(rank_list(every_other), "1, 3, 5, 7, 9, 11, 13, 15 and 12 more");
    std::vector<int> all;
    for (int r = 1; r < 1000000; ++r) all.push_back(r);
    EXPECT_EQ(rank_list(all), "1-999999");
}

LaunchEnv rank_env(int rank, int world, int port) {
    LaunchEnv e;
    e.rank = rank;
    e.world_size = world;
    e.master_port = port;
    e.launcher = "test";
    e.job_secret = "test job secret!";
    return e;
}

// Runs `body` in a child process; its return value is the exit status (an exception: 99).
pid_t spawn(const std::function<int()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        int code = 99;
        try {
            code = body();
        } catch (...) {
        }
        ::_exit(code);
    }
    return pid;
}

int exit_status(pid_t pid) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Exit status of a child whose rendezvous failed with a message containing `text`.
int failed_with(const std::function<void()>& body, const std::string& text) {
    try {
        body();
    } catch (const RendezvousError& e) {
        return std::string(e.what()).find(text) != std::string::npos ? 10 : 11;
    }
    return 12;
}

TEST(Rendezvous, RanksShareABlobAndGatherRecords) {
    const int world = 4, port = free_loopback_port();
    const std::string id(128, '\x7f');  // what NCCL's unique id looks like: 128 opaque bytes
    std::vector<pid_t> kids;
    for (int r = 1; r < world; ++r)
        kids.push_back(spawn([&, r] {
            if (r == 2) std::this_thread::sleep_for(200ms);  // ranks arrive in any order
            Rendezvous rv(rank_env(r, world, port), 10s);
            if (rv.broadcast("ignored") != id) return 1;
            const auto all = rv.all_gather("record of " + std::to_string(r));
            for (int i = 0; i < world; ++i)
                if (all[i] != "record of " + std::to_string(i)) return 2;
            rv.barrier();
            return 0;
        }));
    Rendezvous rv(rank_env(0, world, port), 10s);
    EXPECT_EQ(rv.broadcast(id), id);
    const auto all = rv.all_gather("record of 0");
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(all[3], "record of 3");
    rv.barrier();
    for (pid_t k : kids) EXPECT_EQ(exit_status(k), 0);
}

TEST(Rendezvous, ExcludedRanksLeaveAndTheRestAreRenumbered) {
    const int world = 4, port = free_loopback_port();
    std::vector<pid_t> kids;
    for (int r = 1; r < world; ++r)
        kids.push_back(spawn([&, r] {
            Rendezvous rv(rank_env(r, world, port), 10s);
            if (!rv.exclude({2})) return r == 2 ? 0 : 1;  // rank 2 leaves
            const int now = r == 1 ? 1 : 2;                 // rank 3 became rank 2
            if (rv.rank() != now || rv.world_size() != 3) return 2;
            const auto all = rv.all_gather("was " + std::to_string(r));
            return all == std::vector<std::string>{"was 0", "was 1", "was 3"} ? 0 : 3;
        }));
    Rendezvous rv(rank_env(0, world, port), 10s);
    EXPECT_THROW(rv.exclude({0}), std::invalid_argument);
    ASSERT_TRUE(rv.exclude({2}));
    EXPECT_EQ(rv.world_size(), 3);
    EXPECT_EQ(rv.all_gather("was 0"), (std::vector<std::string>{"was 0", "was 1", "was 3"}));
    for (pid_t k : kids) EXPECT_EQ(exit_status(k), 0);
}

TEST(Rendezvous, ArraysOfOneSizeAreGatheredAndAnotherSizeIsNamed) {
    // Ranks 0 and 1 send 4 bytes, rank 2 sends 5: ranks 0 and 1 name rank 2, rank 2 names
    // rank 0 (the first whose size differs from its own).
    const int world = 3, port = free_loopback_port();
    std::vector<pid_t> kids;
    for (int r = 1; r < world; ++r)
        kids.push_back(spawn([&, r] {
            Rendezvous rv(rank_env(r, world, port), 10s);
            if (rv.all_gather_same_size("abc" + std::to_string(r), "test") !=
                std::vector<std::string>{"abc0", "abc1", "abc2"})
                return 1;
            return failed_with([&] { rv.all_gather_same_size(r == 2 ? "12345" : "1234", "sum"); },
                               r == 2 ? "sum: rank 0 sent 4 bytes, expected 5 (ranks disagree on the array)"
                                      : "sum: rank 2 sent 5 bytes, expected 4 (ranks disagree on the array)");
        }));
    Rendezvous rv(rank_env(0, world, port), 10s);
    EXPECT_EQ(rv.all_gather_same_size("abc0", "test"), (std::vector<std::string>{"abc0", "abc1", "abc2"}));
    std::string error;
    try {
        rv.all_gather_same_size("1234", "sum");
    } catch (const RendezvousError& e) {
        error = e.what();
    }
    EXPECT_EQ(error, "sum: rank 2 sent 5 bytes, expected 4 (ranks disagree on the array)");
    EXPECT_EQ(exit_status(kids[0]), 10);
    EXPECT_EQ(exit_status(kids[1]), 10);
}

TEST(Rendezvous, AJobOfOneNeedsNoSocket) {
    Rendezvous rv(LaunchEnv{}, 1s);
    EXPECT_EQ(rv.broadcast("x"), "x");
    EXPECT_EQ(rv.all_gather("y"), std::vector<std::string>{"y"});
}

// Rank 0 of `world` waits 600 ms while only rank `joins` joins: rank 0's error, and the
// joined rank's exit status (10: it learned that rank 0 is gone).
std::pair<std::string, int> rank0_waiting_with(int joins, int world) {
    const int port = free_loopback_port();
    const pid_t child = spawn([&] {
        return failed_with([&] {
            Rendezvous rv(rank_env(joins, world, port), 5s);
            rv.barrier();
        }, "rank 0");
    });
    std::string error;
    try {
        Rendezvous rv(rank_env(0, world, port), 600ms);
    } catch (const RendezvousError& e) {
        error = e.what();
    }
    return {error, exit_status(child)};
}

TEST(Rendezvous, AMissingRankIsNamedAndTheOthersFail) {
    const auto [error, joined] = rank0_waiting_with(1, 3);
    EXPECT_NE(error.find("rank(s) 2 of 3 did not join within 600 ms"), std::string::npos) << error;
    EXPECT_EQ(joined, 10);  // rank 1 learns that rank 0 is gone
}

TEST(Rendezvous, ManyMissingRanksAreSummarised) {
    const auto [error, joined] = rank0_waiting_with(5, 200);
    EXPECT_NE(error.find(": rank(s) 1-4, 6-199 of 200 did not join within 600 ms"), std::string::npos) << error;
    EXPECT_EQ(joined, 10);
}

TEST(Rendezvous, AWorldPastRankZerosOpenFileLimitFailsBeforeListening) {
    const pid_t child = spawn([&] {
        const rlimit low{100, 100};
        if (::setrlimit(RLIMIT_NOFILE, &low) != 0) return 98;
        return failed_with([&] { Rendezvous rv(rank_env(0, 200, free_loopback_port()), 5s); },
                           "rank 0 can open 100 files (ulimit -n), too few for 200 ranks' connections; raise it to 264");
    });
    EXPECT_EQ(exit_status(child), 10);
    LaunchEnv past = rank_env(0, 5000, free_loopback_port());
    EXPECT_EQ(failed_with([&] { Rendezvous rv(past, 1s); }, "world size 5000 is past the 4096 ranks"), 10);
}

TEST(Rendezvous, TheSameRankTwiceIsRefused) {
    const int port = free_loopback_port();
    auto join_as_one = [&] {
        return failed_with([&] { Rendezvous rv(rank_env(1, 3, port), 5s); rv.barrier(); }, "joined twice");
    };
    const pid_t a = spawn(join_as_one), b = spawn(join_as_one);
    const pid_t two = spawn([&] {
        std::this_thread::sleep_for(300ms);
        Rendezvous rv(rank_env(2, 3, port), 5s);
        rv.barrier();
        return 0;
    });
    Rendezvous rv(rank_env(0, 3, port), 5s);
    rv.barrier();
    const int sa = exit_status(a), sb = exit_status(b);
    EXPECT_EQ(std::min(sa, sb), 10) << "one of the two is refused";
    EXPECT_EQ(std::max(sa, sb), 12) << "the other one joined";
    EXPECT_EQ(exit_status(two), 0);
}

TEST(Rendezvous, ADifferentWorldSizeIsRefused) {
    const int port = free_loopback_port();
    const pid_t wrong = spawn([&] { return failed_with([&] { Rendezvous rv(rank_env(1, 4, port), 5s); }, "world size 4 differs"); });
    const pid_t right = spawn([&] {
        std::this_thread::sleep_for(500ms);
        Rendezvous rv(rank_env(1, 2, port), 5s);
        return 0;
    });
    Rendezvous rv(rank_env(0, 2, port), 5s);
    EXPECT_EQ(exit_status(wrong), 10);
    EXPECT_EQ(exit_status(right), 0);
}

// A loopback connection to rank 0 (retrying until it listens); -1 when none came up.
int connect_to(int port) {
    for (int attempt = 0; attempt < 200; ++attempt) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(std::uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
        ::close(fd);
        std::this_thread::sleep_for(20ms);
    }
    return -1;
}

void send_raw_frame(int fd, const std::string& data) {
    std::string frame(4, '\0');
    for (int i = 0; i < 4; ++i) frame[std::size_t(i)] = char((data.size() >> (8 * i)) & 0xFF);
    frame += data;
    if (::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) != ssize_t(frame.size())) frame.clear();
}

std::string recv_raw_frame(int fd) {
    unsigned char len[4];
    std::string data;
    if (::recv(fd, len, 4, MSG_WAITALL) == 4) {
        data.resize(len[0] | (len[1] << 8) | (len[2] << 16));
        if (::recv(fd, data.data(), data.size(), MSG_WAITALL) != ssize_t(data.size())) data = "(cut short)";
    }
    return data;
}

// A connection to rank 0 on the loopback that takes rank 0's greeting, sends `place`
// and a nonce with the proof of rank 1 of 2 under `secret`, and returns rank 0's answer;
// `link`, when given, gets the connection and its frames' key instead of its closing.
std::string answer_to(const std::string& place, int port, const std::string& secret = "test job secret!",
                      std::pair<int, std::string>* link = nullptr) {
    const int fd = connect_to(port);
    if (fd < 0) return "(no connection)";
    const std::string greeting = recv_raw_frame(fd);
    const std::string nonce0 = from_hex(greeting.substr(std::min<std::size_t>(greeting.size(), 22)));
    const std::string nonce(32, 'n');
    send_raw_frame(fd, place + " " + to_hex(nonce) + " " + to_hex(hello_proof(secret, true, nonce0, nonce, 2, 1)));
    const std::string answer = recv_raw_frame(fd);
    if (link) *link = {fd, link_key(secret, nonce0, nonce, 2, 1)};
    else ::close(fd);
    return answer;
}

TEST(Rendezvous, RankZeroReadsAHelloOfAnyLength) {
    const std::string secret = "test job secret!", nonce0(32, 'N'), nonce(32, 'n');
    const std::string proof = hello_proof(secret, true, nonce0, nonce, 4, 3);
    const std::string good = "fp8scope-rendezvous 6 4 3 " + to_hex(nonce) + " " + to_hex(proof);
    const JoiningHello h = check_hello(good, 4, secret, nonce0);
    EXPECT_EQ(h.rank, 3);
    EXPECT_EQ(h.error, "");
    EXPECT_EQ(h.key, link_key(secret, nonce0, nonce, 4, 3));
    // Shorter than a nonce and a proof (an empty frame read past the string's end).
    for (const std::string& bad : {std::string(), std::string("x"), good.substr(0, 40), good.substr(30), good + "0"})
        EXPECT_EQ(check_hello(bad, 4, secret, nonce0).error, "not an fp8scope rendezvous hello") << bad;
    EXPECT_EQ(check_hello(good, 4, secret, std::string(32, 'M')).error,
              "the hello does not prove the job's secret (set FP8SCOPE_JOB_SECRET to rank 0's on every rank)");
}

TEST(Rendezvous, OnlyTheExactHelloJoins) {
    const int port = free_loopback_port();
    const pid_t child = spawn([&] {
        // Each would read as rank 1 of 2 word by word: trailing bytes, a sign, leading
        // zeros, other spacing.
        for (const char* bad : {"fp8scope-rendezvous 6 2 1x", "fp8scope-rendezvous 6 2 1 ", "fp8scope-rendezvous 6 2 +1",
                                "fp8scope-rendezvous 6 02 1", "fp8scope-rendezvous  5 2 1", "fp8scope-rendezvous 6 2\t1",
                                "fp8scope-rendezvous 05 2 1", "fp8scope-rendezvous 6 2 1\n", "fp8scope-rendezvous 6 2"})
            if (answer_to(bad, port) != "error: not an fp8scope rendezvous hello") return 11;
        Rendezvous rv(rank_env(1, 2, port), 5s);  // the exact hello still joins
        return 10;
    });
    Rendezvous rv(rank_env(0, 2, port), 5s);
    EXPECT_EQ(exit_status(child), 10);
}

TEST(Rendezvous, RanksOfAnotherVersionAreRefusedNamingBothVersions) {
    // A rank of version 5 (which knows no roster for a new hub), 4 (which cannot join an
    // elastic job late), 3 (whose frames carry no
    // kind, so it cannot take part in an elastic recovery) or 2 (whose step records lack the
    // FP8 sum figures) at a rank 0 of 6.
    const int port = free_loopback_port();
    const pid_t child = spawn([&] {
        for (const char* old : {"fp8scope-rendezvous 5 2 1", "fp8scope-rendezvous 4 2 1", "fp8scope-rendezvous 3 2 1",
                                "fp8scope-rendezvous 2 2 1", "fp8scope-rendezvous 1 2 1"})
            if (answer_to(old, port) != "error: the joining rank speaks rendezvous version " + std::string(old).substr(20, 1) +
                                            ", rank 0 version 6 (start every rank with the same fp8scope-engine build)")
                return 11;
        Rendezvous rv(rank_env(1, 2, port), 5s);
        return 10;
    });
    Rendezvous rv(rank_env(0, 2, port), 5s);
    EXPECT_EQ(exit_status(child), 10);

    // A rank 0 of version 2 greets a rank of version 6: the rank says so and stops.
    const int old_port = free_loopback_port();
    const pid_t old_rank0 = spawn([&] {
        const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(std::uint16_t(old_port));
        const int one = 1;
        ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 4) != 0) return 11;
        const int fd = ::accept(listener, nullptr, nullptr);
        send_raw_frame(fd, "fp8scope-rendezvous 2 " + to_hex(std::string(32, 'N')));
        char byte = 0;
        ::recv(fd, &byte, 1, 0);  // until the rank hangs up
        return 10;
    });
    EXPECT_EQ(failed_with([&] { Rendezvous rv(rank_env(1, 2, old_port), 5s); },
                          "rank 0 at 127.0.0.1:" + std::to_string(old_port) +
                              " speaks rendezvous version 2, rank 1 version 6 (start every rank with the same "
                              "fp8scope-engine build)"),
              10);
    EXPECT_EQ(exit_status(old_rank0), 10);
}

TEST(Rendezvous, SilentAndHalfHellosHoldUpNoRank) {
    const int port = free_loopback_port();
    const pid_t child = spawn([&] {
        // Before the real rank: 200 connections that say nothing and one that sends half
        // a hello; each used to hold rank 0 for the whole rendezvous timeout.
        std::vector<int> idle;
        for (int i = 0; i < 200; ++i) idle.push_back(connect_to(port));
        const int half = connect_to(port);
        const std::string part = std::string("\x20\0\0\0", 4) + "fp8scope-rendez";
        if (half < 0 || ::send(half, part.data(), part.size(), 0) != ssize_t(part.size())) return 11;
        Rendezvous rv(rank_env(1, 2, port), 30s);
        rv.barrier();
        // Rank 0 closes the half hello: after its greeting, its read ends.
        char byte = 0;
        if (recv_raw_frame(half).rfind("fp8scope-rendezvous 6 ", 0) != 0) return 13;
        return ::recv(half, &byte, 1, 0) == 0 ? 10 : 12;
    });
    const auto start = std::chrono::steady_clock::now();
    Rendezvous rv(rank_env(0, 2, port), 30s);
    const auto took = std::chrono::steady_clock::now() - start;
    rv.barrier();
    EXPECT_LT(took, 5s) << "the job forms well within the 30 s rendezvous timeout";
    EXPECT_EQ(exit_status(child), 10);
}

TEST(Rendezvous, AConnectionWithoutAHelloIsClosedWithinSeconds) {
    const int port = free_loopback_port();
    const pid_t child = spawn([&] {
        const int quiet = connect_to(port);
        const auto start = std::chrono::steady_clock::now();
        char byte = 0;
        if (recv_raw_frame(quiet).rfind("fp8scope-rendezvous 6 ", 0) != 0) return 13;
        if (::recv(quiet, &byte, 1, 0) != 0) return 11;  // rank 0 closes it, the job still forming
        if (std::chrono::steady_clock::now() - start > 10s) return 12;
        Rendezvous rv(rank_env(1, 2, port), 30s);
        return 10;
    });
    Rendezvous rv(rank_env(0, 2, port), 30s);
    EXPECT_EQ(exit_status(child), 10);
}

TEST(Rendezvous, ARankWithoutTheJobsSecretIsRefusedNamingTheVariable) {
    const int port = free_loopback_port();
    const pid_t child = spawn([&] {
        if (answer_to("fp8scope-rendezvous 6 2 1", port, "another secret!!") !=
            "error: the hello does not prove the job's secret (set FP8SCOPE_JOB_SECRET to rank 0's on every rank)")
            return 11;
        LaunchEnv none = rank_env(1, 2, port);
        none.job_secret.clear();
        if (failed_with([&] { Rendezvous rv(none, 5s); }, "needs the job's secret: set FP8SCOPE_JOB_SECRET") != 10)
            return 12;
        Rendezvous rv(rank_env(1, 2, port), 5s);  // the secret joins
        return 10;
    });
    Rendezvous rv(rank_env(0, 2, port), 5s);
    EXPECT_EQ(exit_status(child), 10);
}

// The data frame of `data` a rank sends up to rank 0 as its `seq`th: its kind, the data
// and the MAC of both.
std::string up_frame(const std::string& key, std::uint64_t seq, const std::string& data) {
    const std::string body = "D" + data;
    std::string frame;
    for (int i = 0; i < 4; ++i) frame += char((body.size() >> (8 * i)) & 0xFF);
    return frame + body + frame_mac(key, 'u', seq, body);
}

TEST(Rendezvous, AFrameThatFailsItsMacEndsTheExchangeNamingTheRank) {
    for (const std::string how : {"replayed", "altered"}) {
        const int port = free_loopback_port();
        const pid_t child = spawn([&] {
            std::pair<int, std::string> link;
            if (answer_to("fp8scope-rendezvous 6 2 1", port, "test job secret!", &link).rfind("ok ", 0) != 0) return 11;
            const std::string first = up_frame(link.second, 0, "one");
            ::send(link.first, first.data(), first.size(), MSG_NOSIGNAL);  // taken: rank 0 sends both back
            std::string second = how == "replayed" ? first : up_frame(link.second, 1, "two");
            if (how == "altered") second[4] = 'T';
            ::send(link.first, second.data(), second.size(), MSG_NOSIGNAL);
            std::this_thread::sleep_for(1s);
            return 10;
        });
        Rendezvous rv(rank_env(0, 2, port), 5s);
        const auto all = rv.all_gather("zero");
        EXPECT_EQ(all.at(1), "one") << how;
        EXPECT_EQ(failed_with([&] { rv.all_gather("zero"); },
                              "a frame from rank 1 failed its authentication (not sent by rank 1 of this job"),
                  10)
            << how;
        EXPECT_EQ(exit_status(child), 10);
    }
}

// The local addresses of the sockets listening on `port` (/proc/net/tcp's hex, e.g.
// "0100007F" for 127.0.0.1, "00000000" for every interface).
std::vector<std::string> listening_on(int port) {
    std::vector<std::string> out;
    char hex_port[8];
    std::snprintf(hex_port, sizeof hex_port, "%04X", port);
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(table);
        std::string line;
        std::getline(in, line);  // the header
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string slot, local, remote, state;
            fields >> slot >> local >> remote >> state;
            const std::size_t colon = local.find(':');
            if (state == "0A" && local.substr(colon + 1) == hex_port) out.push_back(local.substr(0, colon));
        }
    }
    return out;
}

TEST(Rendezvous, AJobOnTheLoopbackListensOnTheLoopbackOnly) {
    for (const std::string addr : {"127.0.0.1", "localhost"}) {
        LaunchEnv env = rank_env(0, 2, free_loopback_port());
        env.master_addr = addr;
        std::vector<std::string> seen;
        std::thread watch([&] {
            for (int i = 0; i < 50 && seen.empty(); ++i) {
                std::this_thread::sleep_for(20ms);
                seen = listening_on(env.master_port);
            }
        });
        EXPECT_THROW(Rendezvous(env, 1500ms), RendezvousError);  // nobody joins
        watch.join();
        ASSERT_EQ(seen.size(), 1u) << addr;
        EXPECT_TRUE(seen[0] == "0100007F" || seen[0] == "00000000000000000000000001000000") << addr << ": " << seen[0];
    }
}

TEST(Rendezvous, AHungRankEndsTheExchangeWithItsName) {
    const int port = free_loopback_port();
    const pid_t hung = spawn([&] {
        Rendezvous rv(rank_env(1, 2, port), 5s);
        std::this_thread::sleep_for(3s);  // never sends its record
        return 0;
    });
    Rendezvous rv(rank_env(0, 2, port), 800ms);
    std::string error;
    try {
        rv.all_gather("0");
    } catch (const RendezvousError& e) {
        error = e.what();
    }
    EXPECT_NE(error.find("rank 1 sent nothing within the rendezvous timeout"), std::string::npos) << error;
    ::kill(hung, SIGKILL);
    exit_status(hung);
}

TEST(Rendezvous, ADeadRankEndsTheExchangeWithItsName) {
    const int port = free_loopback_port();
    const pid_t dead = spawn([&] {
        Rendezvous rv(rank_env(1, 2, port), 5s);
        return 0;  // exits right after joining
    });
    Rendezvous rv(rank_env(0, 2, port), 5s);
    std::string error;
    try {
        rv.all_gather("0");
    } catch (const RendezvousError& e) {
        error = e.what();
    }
    EXPECT_NE(error.find("rank 1 closed the connection"), std::string::npos) << error;
    EXPECT_EQ(exit_status(dead), 0);
}

// An elastic job's recovery round: rank 0 names the rank lost in an exchange, the others
// learn of it from its fault frame, and all survivors get the lost ranks and each other's
// records, renumbered, and exchange again without it.
TEST(Rendezvous, ElasticSurvivorsAgreeOnTheWorldWithoutADeadRank) {
    const int world = 4, port = free_loopback_port();
    std::vector<pid_t> kids;
    for (int r = 1; r < world; ++r)
        kids.push_back(spawn([&, r] {
            Rendezvous rv(rank_env(r, world, port), 5s);
            rv.set_elastic(true);
            if (r == 2) return 0;  // dies right after joining
            std::vector<int> seen{-1};
            try {
                rv.all_gather("step");
            } catch (const WorldFault& f) {
                seen = f.lost();
            }
            if (!seen.empty()) return 2;  // only rank 0 sees which rank failed
            const Rendezvous::NewWorld w = rv.agree_world("record of " + std::to_string(r), {});
            if (w.lost != std::vector<int>{2} || w.old_world != 4) return 3;
            if (w.records != std::vector<std::string>{"record of 0", "record of 1", "record of 3"}) return 4;
            if (rv.world_size() != 3 || rv.rank() != (r == 1 ? 1 : 2)) return 5;
            if (rv.launch_ranks() != std::vector<int>{0, 1, 3}) return 6;
            return rv.all_gather("was " + std::to_string(r)) == std::vector<std::string>{"was 0", "was 1", "was 3"} ? 0 : 7;
        }));
    Rendezvous rv(rank_env(0, world, port), 5s);
    rv.set_elastic(true);
    std::vector<int> lost;
    std::string why;
    try {
        rv.all_gather("step");
    } catch (const WorldFault& f) {
        lost = f.lost();
        why = f.what();
    }
    EXPECT_EQ(lost, std::vector<int>{2});
    EXPECT_NE(why.find("rank 2 closed the connection"), std::string::npos) << why;
    const Rendezvous::NewWorld w = rv.agree_world("record of 0", lost);
    EXPECT_EQ(w.lost, std::vector<int>{2});
    EXPECT_EQ(rv.world_size(), 3);
    EXPECT_EQ(rv.all_gather("was 0"), (std::vector<std::string>{"was 0", "was 1", "was 3"}));
    for (pid_t k : kids) EXPECT_EQ(exit_status(k), 0);
}

// Rank 0 of an elastic job of 4 shares the roster and is gone; `gone` (a rank other than
// 0) exits after the roster too, when set. Returns the others' children, which run
// `survivor` then.
std::vector<pid_t> lose_rank_zero(int port, int gone, const std::function<int(Rendezvous&, int)>& survivor) {
    const int world = 4;
    std::vector<pid_t> kids;
    for (int r = 1; r < world; ++r)
        kids.push_back(spawn([&, r] {
            Rendezvous rv(rank_env(r, world, port), 5s);
            rv.set_elastic(true);
            rv.share_roster();
            if (r == gone) return 0;
            rv.set_timeout(1s);
            return survivor(rv, r);
        }));
    Rendezvous rv(rank_env(0, world, port), 5s);
    rv.set_elastic(true);
    rv.share_roster();
    return kids;  // rank 0 is gone: its connections close
}

// The survivors of rank 0 meet at the lowest of them (rank 1), which is rank 0 of the new
// world: rank 0 is named lost in the old numbering, the records come in the new order, and
// the exchanges go through the new hub. A process without the job's secret that reaches
// the new hub meanwhile is refused, and the election goes on without it.
TEST(Rendezvous, ElasticSurvivorsOfRankZeroMeetAtTheLowestRankAsTheNewHub) {
    const std::vector<pid_t> kids = lose_rank_zero(free_loopback_port(), -1, [](Rendezvous& rv, int r) {
        try {
            rv.all_gather("step");
            return 1;  // rank 0 is gone: this cannot succeed
        } catch (const WorldFault&) {
            return 2;  // only rank 0 names a fault
        } catch (const RendezvousError&) {
        }
        if (r == 3) {
            const std::string& hub = rv.roster().at(1);
            const std::string refused = answer_to("fp8scope-rendezvous 6 4 3", std::stoi(hub.substr(hub.find(' ') + 1)),
                                                  "not the job secret");
            if (refused != "error: the hello does not prove the job's secret (set FP8SCOPE_JOB_SECRET to rank 0's on "
                           "every rank)")
                return 8;
        }
        const Rendezvous::NewWorld w = rv.agree_world("record of " + std::to_string(r), {});
        if (w.lost != std::vector<int>{0} || w.old_world != 4) return 3;
        if (w.records != std::vector<std::string>{"record of 1", "record of 2", "record of 3"}) return 4;
        if (rv.world_size() != 3 || rv.rank() != r - 1) return 5;
        if (rv.launch_ranks() != std::vector<int>{1, 2, 3}) return 6;
        return rv.all_gather("was " + std::to_string(r)) == std::vector<std::string>{"was 1", "was 2", "was 3"} ? 0 : 7;
    });
    for (pid_t k : kids) EXPECT_EQ(exit_status(k), 0);
}

// Rank 0 and rank 2 lost: the 2 of 4 that meet again are no majority, and the job ends on
// both, the would-be hub saying why.
TEST(Rendezvous, ElasticSurvivorsOfRankZeroThatAreNoMajorityEnd) {
    const std::vector<pid_t> kids = lose_rank_zero(free_loopback_port(), 2, [](Rendezvous& rv, int r) {
        try {
            rv.all_gather("step");
        } catch (const RendezvousError&) {
        }
        if (r == 3) return failed_with([&] { rv.agree_world("record of 3", {}); }, "");
        return failed_with([&] { rv.agree_world("record of 1", {}); },
                           "rank 0 (the hub) was lost and only 2 of the 4 ranks met again at rank 1 (as launched): "
                           "not a majority");
    });
    for (std::size_t i = 0; i < kids.size(); ++i) EXPECT_EQ(exit_status(kids[i]), i == 1 ? 0 : 10) << "rank " << i + 1;
}

// Rank 0's ranks waiting to join, once one is there (within 5 s).
std::vector<int> joiners_due_soon(Rendezvous& rv) {
    std::vector<int> due;
    for (int i = 0; i < 200 && due.empty(); ++i) {
        std::this_thread::sleep_for(25ms);
        due = rv.joiners_due();
    }
    return due;
}

// An elastic job that lost rank 1 takes its replacement in at a step boundary: the
// replacement is answered "late", gets the state (in several parts: 40 MiB) and slots in
// at its launch rank; a second process for rank 1 while the first waits is refused, and a
// stranger without the job's secret is refused without the job noticing.
TEST(Rendezvous, ElasticJobTakesALostRanksReplacementInAtItsLaunchRank) {
    const int world = 3, port = free_loopback_port();
    const std::string state = [] {
        std::string s(std::size_t(40) << 20, '\0');
        for (std::size_t i = 0; i < s.size(); ++i) s[i] = char(i * 2654435761u >> 24);
        return s;
    }();
    std::vector<pid_t> kids;
    for (int r = 1; r < world; ++r)
        kids.push_back(spawn([&, r] {
            Rendezvous rv(rank_env(r, world, port), 5s);
            rv.set_elastic(true);
            if (r == 1) return 0;  // dies right after joining
            try {
                rv.all_gather("step");
                return 2;
            } catch (const WorldFault&) {
            }
            rv.agree_world("record of 2", {});
            if (rv.world_size() != 2 || rv.rank() != 1) return 3;
            const Rendezvous::Admission a = rv.admit({1}, [] { return std::string("not rank 0's to send"); });
            if (a.joined != std::vector<int>{1} || a.old_world != 2) return 4;
            if (rv.world_size() != 3 || rv.rank() != 2 || rv.launch_ranks() != std::vector<int>{0, 1, 2}) return 5;
            return rv.all_gather("was 2") == std::vector<std::string>{"was 0", "was 1", "was 2"} ? 0 : 6;
        }));
    Rendezvous rv(rank_env(0, world, port), 5s);
    rv.set_elastic(true);
    std::vector<int> lost;
    try {
        rv.all_gather("step");
    } catch (const WorldFault& f) {
        lost = f.lost();
    }
    ASSERT_EQ(lost, std::vector<int>{1});
    rv.agree_world("record of 0", lost);
    ASSERT_EQ(rv.world_size(), 2);
    const pid_t joiner = spawn([&] {
        Rendezvous late(rank_env(1, world, port), 5s);
        if (!late.late()) return 2;
        if (late.late_state() != state) return 3;
        late.late_ready();
        if (late.world_size() != 3 || late.rank() != 1 || late.launch_ranks() != std::vector<int>{0, 1, 2}) return 4;
        late.set_elastic(true);
        return late.all_gather("was 1") == std::vector<std::string>{"was 0", "was 1", "was 2"} ? 0 : 5;
    });
    const std::vector<int> due = joiners_due_soon(rv);
    ASSERT_EQ(due, std::vector<int>{1});
    const pid_t twin = spawn([&] {
        return failed_with([&] { Rendezvous again(rank_env(1, world, port), 5s); }, "rank 1 is already waiting to join");
    });
    EXPECT_EQ(exit_status(twin), 10);
    const pid_t stranger = spawn([&] {
        LaunchEnv env = rank_env(1, world, port);
        env.job_secret = "another secret!!";
        return failed_with([&] { Rendezvous again(env, 5s); }, "does not prove the job's secret");
    });
    EXPECT_EQ(exit_status(stranger), 10);
    EXPECT_EQ(rv.joiners_due(), std::vector<int>{1});
    int asked = 0;
    const Rendezvous::Admission a = rv.admit(due, [&] { return ++asked, state; });
    EXPECT_EQ(asked, 1);
    EXPECT_EQ(a.joined, std::vector<int>{1});
    EXPECT_TRUE(a.failed.empty());
    EXPECT_EQ(a.old_world, 2);
    EXPECT_EQ(rv.launch_ranks(), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(rv.all_gather("was 0"), (std::vector<std::string>{"was 0", "was 1", "was 2"}));
    EXPECT_TRUE(rv.joiners_due().empty());
    EXPECT_EQ(exit_status(joiner), 0);
    for (pid_t k : kids) EXPECT_EQ(exit_status(k), 0);
}

// A joiner that leaves before it holds the state, or that never answers (within the
// timeout), is dropped and the job is as it was; a job that is not elastic refuses a late
// rank, saying so.
TEST(Rendezvous, AFailedJoinLeavesTheJobAsItWasAndAJobNotElasticRefusesLateRanks) {
    const int port = free_loopback_port();
    const pid_t rank1 = spawn([&] {
        Rendezvous rv(rank_env(1, 3, port), 1s);
        rv.set_elastic(true);
        rv.agree_world("record of 1", {});  // rank 2 lost
        for (int i = 0; i < 2; ++i)
            if (rv.admit({2}, {}).joined != std::vector<int>{}) return 2;
        return rv.all_gather("was 1") == std::vector<std::string>{"was 0", "was 1"} ? 0 : 3;
    });
    const pid_t rank2 = spawn([&] { Rendezvous rv(rank_env(2, 3, port), 1s); return 0; });
    Rendezvous rv(rank_env(0, 3, port), 1s);
    rv.set_elastic(true);
    EXPECT_EQ(exit_status(rank2), 0);
    rv.agree_world("record of 0", {2});
    const pid_t quitter = spawn([&] {
        Rendezvous late(rank_env(2, 3, port), 1s);
        return late.late() ? 0 : 2;  // and leaves
    });
    EXPECT_EQ(exit_status(quitter), 0);
    ASSERT_EQ(joiners_due_soon(rv), std::vector<int>{2});
    Rendezvous::Admission a = rv.admit({2}, [] { return std::string("state"); });
    EXPECT_TRUE(a.joined.empty());
    ASSERT_EQ(a.failed.size(), 1u);
    EXPECT_EQ(a.failed[0].first, 2);

    const pid_t sleeper = spawn([&] {
        Rendezvous late(rank_env(2, 3, port), 1s);
        std::this_thread::sleep_for(1500ms);  // hung past the timeout: never takes the state
        return late.late() ? 0 : 2;
    });
    ASSERT_EQ(joiners_due_soon(rv), std::vector<int>{2});
    const auto t0 = std::chrono::steady_clock::now();
    a = rv.admit({2}, [] { return std::string("state"); });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "bounded by the timeout";
    EXPECT_TRUE(a.joined.empty());
    ASSERT_EQ(a.failed.size(), 1u);
    EXPECT_NE(a.failed[0].second.find("sent nothing within the rendezvous timeout"), std::string::npos)
        << a.failed[0].second;
    EXPECT_EQ(rv.world_size(), 2);
    EXPECT_EQ(rv.all_gather("was 0"), (std::vector<std::string>{"was 0", "was 1"}));
    EXPECT_EQ(exit_status(rank1), 0);
    EXPECT_EQ(exit_status(sleeper), 0);

    rv.set_elastic(false);
    const pid_t refused = spawn([&] {
        return failed_with([&] { Rendezvous late(rank_env(2, 3, port), 1s); }, "the job is under way and is not elastic");
    });
    EXPECT_EQ(exit_status(refused), 10);
}

// A rank that begins the round by itself (its own collective failed) brings rank 0 in;
// a rank that sends no record within the timeout (hung) is lost.
TEST(Rendezvous, ElasticRoundBegunByARankLeavesAHungRankBehind) {
    const int world = 4, port = free_loopback_port();
    std::vector<pid_t> kids;
    for (int r = 1; r < world; ++r)
        kids.push_back(spawn([&, r] {
            Rendezvous rv(rank_env(r, world, port), 1s);
            rv.set_elastic(true);
            if (r == 2) {
                std::this_thread::sleep_for(6s);  // hung: never answers
                return 0;
            }
            if (r == 3) {
                try {
                    rv.all_gather("step");
                    return 2;
                } catch (const WorldFault&) {
                }
            }
            const Rendezvous::NewWorld w = rv.agree_world("record of " + std::to_string(r), {});
            if (w.lost != std::vector<int>{2}) return 3;
            return w.records == std::vector<std::string>{"record of 0", "record of 1", "record of 3"} ? 0 : 4;
        }));
    Rendezvous rv(rank_env(0, world, port), 1s);
    rv.set_elastic(true);
    std::string why;
    try {
        rv.all_gather("step");
    } catch (const WorldFault& f) {
        EXPECT_TRUE(f.lost().empty());
        why = f.what();
    }
    EXPECT_NE(why.find("rank 1 began a recovery"), std::string::npos) << why;
    const auto t0 = std::chrono::steady_clock::now();
    const Rendezvous::NewWorld w = rv.agree_world("record of 0", {});
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << "bounded by the timeout";
    EXPECT_EQ(w.lost, std::vector<int>{2});
    EXPECT_EQ(exit_status(kids[0]), 0);
    EXPECT_EQ(exit_status(kids[2]), 0);
    ::kill(kids[1], SIGKILL);
    exit_status(kids[1]);
}

}  // namespace
}  // namespace fp8scope
