// The real `fp8scope-engine train --listen` on a temporary socket: a client attaches,
// receives the run's metadata and step records, and pauses, switches the recipe,
// resumes, changes the capture interval and stops it; SIGTERM and a pausing client that
// goes away end or resume the run cleanly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "fp8/training_recipe.h"
#include "live_test_util.h"

extern char** environ;

namespace fp8scope::live::test {
namespace {

using namespace std::chrono_literals;

// The engine as a child process; killed (by its pid) if a test leaves it running.
struct Engine {
    Engine(const std::vector<std::string>& args, const std::string& stderr_path) {
        std::vector<std::string> argv = {FP8SCOPE_ENGINE, "train"};
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<char*> cargv;
        for (auto& a : argv) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, cargv.data(), environ) != 0) pid = -1;
        posix_spawn_file_actions_destroy(&fa);
    }
    ~Engine() {
        if (pid > 0 && !wait(0ms)) {
            ::kill(pid, SIGKILL);
            wait(5s);
        }
    }
    // True when the engine exited within `timeout`; `status` is its exit code.
    bool wait(std::chrono::milliseconds timeout) {
        return eventually([&] {
            int st = 0;
            if (pid <= 0) return true;
            if (::waitpid(pid, &st, WNOHANG) != pid) return false;
            status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            pid = -1;
            return true;
        }, timeout);
    }
    pid_t pid = -1;
    int status = -1;
};

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Connects once the engine has bound its socket.
std::unique_ptr<LiveClient> attach(const Endpoint& e, const std::string& token, Collected& got) {
    std::unique_ptr<LiveClient> client;
    eventually([&] {
        try {
            client = std::make_unique<LiveClient>(e, token, got.handlers());
            return true;
        } catch (const LiveError&) {
            return false;
        }
    }, 30s);
    return client;
}

// A tiny run that goes on until stopped, served on the local socket `sock`.
std::vector<std::string> tiny_listening_run(const std::string& sock) {
    return {"--config", std::string(FP8SCOPE_CONFIGS) + "/tiny.json", "--threads", "1", "--steps", "100000",
            "--quiet", "--listen", "unix:" + sock};
}

// tiny_listening_run() in a directory of its own.
struct TinyRun {
    TinyRun() : sock(dir / "engine.sock"), engine(tiny_listening_run(sock), dir / "stderr.txt") {}
    Endpoint endpoint() const { return parse_endpoint("unix:" + sock); }
    std::string err() const { return read_file(dir / "stderr.txt"); }
    TempDir dir;
    std::string sock;
    Engine engine;
};

int count_events(Collected& got, trace::EventKind kind) {
    int n = 0;
    for (const auto& e : got.events) n += e.kind == kind;
    return n;
}

TEST(LiveEngine, AttachFollowAndSteerARealRun) {
    TempDir dir;
    const std::string sock = dir / "engine.sock";
    Engine engine(tiny_listening_run(sock), dir / "stderr.txt");
    ASSERT_GT(engine.pid, 0);
    Collected got;
    auto client = attach(parse_endpoint("unix:" + sock), "", got);
    ASSERT_TRUE(client) << read_file(dir / "stderr.txt");
    // Printed right after the socket is bound, so possibly just after we connected.
    EXPECT_TRUE(eventually([&] {
        return read_file(dir / "stderr.txt").find("fp8scope-engine: listening on unix:" + sock + "\n") !=
               std::string::npos;
    }));

    ASSERT_TRUE(got.wait([&] { return got.steps.size() >= 3; }, 30s));
    const auto names = training_recipe_names();
    const int baseline = static_cast<int>(std::find(names.begin(), names.end(), "baseline") - names.begin());
    const int delayed = static_cast<int>(std::find(names.begin(), names.end(), "delayed") - names.begin());
    {
        std::lock_guard lock(got.mu);
        const auto& meta = got.meta.at(0);
        ASSERT_EQ(meta.runs.size(), 1u);
        EXPECT_EQ(meta.runs[0].recipe, "baseline");
        EXPECT_EQ(meta.training_recipes, names);
        EXPECT_FALSE(meta.linears.empty());
        EXPECT_NE(meta.config_json.find("\"steps\""), std::string::npos);
        for (std::size_t i = 0; i < got.steps.size(); ++i) {
            EXPECT_EQ(got.steps[i].run, 0);
            EXPECT_EQ(got.steps[i].step, static_cast<std::int64_t>(i) + 1);
            EXPECT_TRUE(std::isfinite(got.steps[i].loss));
            EXPECT_GT(got.steps[i].tokens_per_s, 0.0);
            EXPECT_EQ(got.steps[i].recipe, baseline);
        }
        EXPECT_EQ(count_events(got, trace::EventKind::Start), 1);
    }

    CommandReply r = client->send({CommandKind::Pause, -1, "", 0});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_TRUE(got.wait([&] { return count_events(got, trace::EventKind::Pause) == 1; }));
    std::size_t paused_at;
    {
        std::lock_guard lock(got.mu);
        paused_at = got.steps.size();
    }
    std::this_thread::sleep_for(300ms);
    {
        std::lock_guard lock(got.mu);
        EXPECT_EQ(got.steps.size(), paused_at);  // no step while paused
    }

    r = client->send({CommandKind::SwitchRecipe, 0, "no_such_recipe", 0});
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("no_such_recipe"), std::string::npos) << r.error;
    r = client->send({CommandKind::SwitchRecipe, 0, "delayed", 0});
    ASSERT_TRUE(r.ok) << r.error;
    r = client->send({CommandKind::SetCaptureEvery, -1, "", 5});
    ASSERT_TRUE(r.ok) << r.error;
    r = client->send({CommandKind::Resume, -1, "", 0});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_TRUE(got.wait([&] { return got.steps.size() >= paused_at + 3; }, 30s));
    {
        std::lock_guard lock(got.mu);
        EXPECT_EQ(count_events(got, trace::EventKind::RecipeSwitch), 1);
        EXPECT_EQ(count_events(got, trace::EventKind::CaptureInterval), 1);
        EXPECT_EQ(count_events(got, trace::EventKind::Resume), 1);
        EXPECT_EQ(got.steps[paused_at].step, static_cast<std::int64_t>(paused_at) + 1);
        EXPECT_EQ(got.steps[paused_at].recipe, delayed);
    }

    r = client->send({CommandKind::Stop, -1, "", 0});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_TRUE(engine.wait(30s));
    EXPECT_EQ(engine.status, 0) << read_file(dir / "stderr.txt");
    ASSERT_TRUE(got.wait([&] { return !got.closed.empty(); }));
    std::lock_guard lock(got.mu);
    EXPECT_EQ(count_events(got, trace::EventKind::Stop), 1);
    ASSERT_FALSE(got.events.empty());
    EXPECT_EQ(got.events.back().kind, trace::EventKind::End);
    EXPECT_EQ(got.events.back().detail, "stopped");
    EXPECT_EQ(got.events.back().step, got.steps.back().step);
    struct stat st {};
    EXPECT_NE(::stat(sock.c_str(), &st), 0);  // the socket went with the engine
}

// SIGTERM (what a job scheduler or `kill` sends) ends the run like Ctrl-C: it stops
// between steps, ends the stream and removes the socket file (issue 13). A paused run
// is stopped too: the signal does not wait for a step.
TEST(LiveEngine, SigtermStopsCleanlyAndRemovesTheSocket) {
    for (bool paused : {false, true}) {
        SCOPED_TRACE(paused ? "paused" : "running");
        TinyRun run;
        Collected got;
        auto client = attach(run.endpoint(), "", got);
        ASSERT_TRUE(client) << run.err();
        ASSERT_TRUE(got.wait([&] { return got.steps.size() >= 2; }, 30s));
        if (paused) {
            ASSERT_TRUE(client->send({CommandKind::Pause, -1, "", 0}).ok);
        }
        ASSERT_EQ(::kill(run.engine.pid, SIGTERM), 0);
        ASSERT_TRUE(run.engine.wait(30s));
        EXPECT_EQ(run.engine.status, 0) << run.err();
        struct stat st {};
        EXPECT_NE(::stat(run.sock.c_str(), &st), 0) << "the socket file was left behind";
        ASSERT_TRUE(got.wait([&] { return !got.events.empty() && got.events.back().kind == trace::EventKind::End; }));
        EXPECT_EQ(got.events.back().detail, "stopped");
    }
}

// A client pauses the run and goes away: the run resumes by itself and its Resume
// event says why (issue 13).
TEST(LiveEngine, APauseIsLiftedWhenThePausingClientDisconnects) {
    TinyRun run;
    Collected watcher;
    auto watch = attach(run.endpoint(), "", watcher);
    ASSERT_TRUE(watch) << run.err();
    {
        Collected got;
        auto pauser = attach(run.endpoint(), "", got);
        ASSERT_TRUE(pauser);
        ASSERT_TRUE(pauser->send({CommandKind::Pause, -1, "", 0}).ok);
        ASSERT_TRUE(watcher.wait([&] { return count_events(watcher, trace::EventKind::Pause) == 1; }));
    }
    ASSERT_TRUE(watcher.wait([&] { return count_events(watcher, trace::EventKind::Resume) == 1; }, 30s));
    {
        std::lock_guard lock(watcher.mu);
        for (const auto& e : watcher.events)
            if (e.kind == trace::EventKind::Resume) {
                EXPECT_NE(e.detail.find("the client that paused the run disconnected"), std::string::npos) << e.detail;
            }
    }
    ASSERT_TRUE(watch->send({CommandKind::Stop, -1, "", 0}).ok);
    ASSERT_TRUE(run.engine.wait(30s));
}

TEST(LiveEngine, TcpWithoutTokenPrintsAGeneratedOneThatIsRequired) {
    TempDir dir;
    Engine engine({"--config", std::string(FP8SCOPE_CONFIGS) + "/tiny.json", "--threads", "1", "--steps", "100000",
                   "--quiet", "--listen", "tcp:0"},
                  dir / "stderr.txt");
    std::string line;
    ASSERT_TRUE(eventually([&] {
        line = read_file(dir / "stderr.txt");
        return line.find("(token ") != std::string::npos && line.find(")\n") != std::string::npos;
    }, 30s)) << line;
    const auto at = line.find("listening on ") + 13;
    const auto tok = line.find(" (token ");
    Endpoint e = parse_endpoint(line.substr(at, tok - at));
    std::string token = line.substr(tok + 8, line.find(')', tok) - tok - 8);
    EXPECT_EQ(e.host, "127.0.0.1");
    EXPECT_EQ(token.size(), 32u);

    EXPECT_THROW(LiveClient(e, "not-it", {}), LiveError);
    Collected got;
    LiveClient client(e, token, got.handlers());
    ASSERT_TRUE(got.wait([&] { return !got.steps.empty(); }, 30s));
    EXPECT_TRUE(client.send({CommandKind::Stop, -1, "", 0}).ok);
    ASSERT_TRUE(engine.wait(30s));
    EXPECT_EQ(engine.status, 0);
}

TEST(LiveEngine, BadListenEndpointIsAUsageError) {
    TempDir dir;
    Engine engine({"--config", std::string(FP8SCOPE_CONFIGS) + "/tiny.json", "--listen", "tcp:notaport"},
                  dir / "stderr.txt");
    ASSERT_TRUE(engine.wait(30s));
    EXPECT_EQ(engine.status, 2);
    EXPECT_NE(read_file(dir / "stderr.txt").find("bad endpoint 'tcp:notaport'"), std::string::npos);
}

}  // namespace
}  // namespace fp8scope::live::test
