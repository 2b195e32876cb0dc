// Endpoint parsing and printing, and the default local socket's private directory.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "live_protocol.h"
#include "live_test_util.h"

namespace fp8scope::live::test {
namespace {

TEST(LiveEndpoint, ParsesEveryForm) {
    Endpoint u = parse_endpoint("unix:/run/x/engine.sock");
    EXPECT_EQ(u.kind, Endpoint::Kind::Local);
    EXPECT_EQ(u.path, "/run/x/engine.sock");
    EXPECT_EQ(u.to_string(), "unix:/run/x/engine.sock");

    Endpoint p = parse_endpoint("./engine.sock");
    EXPECT_EQ(p.kind, Endpoint::Kind::Local);
    EXPECT_EQ(p.path, "./engine.sock");

    Endpoint t = parse_endpoint("tcp:7878");
    EXPECT_EQ(t.kind, Endpoint::Kind::Tcp);
    EXPECT_EQ(t.host, "127.0.0.1");
    EXPECT_EQ(t.port, 7878);
    EXPECT_EQ(t.to_string(), "tcp:127.0.0.1:7878");

    Endpoint th = parse_endpoint("tcp:gpu-box:9000");
    EXPECT_EQ(th.host, "gpu-box");
    EXPECT_EQ(th.port, 9000);

    Endpoint hp = parse_endpoint("10.0.0.5:0");
    EXPECT_EQ(hp.kind, Endpoint::Kind::Tcp);
    EXPECT_EQ(hp.host, "10.0.0.5");
    EXPECT_EQ(hp.port, 0);

    Endpoint v6 = parse_endpoint("tcp:[::1]:7878");
    EXPECT_EQ(v6.host, "::1");
    EXPECT_EQ(v6.to_string(), "tcp:[::1]:7878");
    EXPECT_EQ(parse_endpoint(v6.to_string()).host, "::1");
}

TEST(LiveEndpoint, RefusesBadTextNamingIt) {
    for (const char* bad : {"", "unix:", "tcp:", "tcp:notaport", "tcp:65536", "tcp:-1", "host:", ":80", "justaname",
                            "tcp:host:80x"}) {
        try {
            parse_endpoint(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const LiveError& e) {
            EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
        }
    }
}

TEST(LiveEndpoint, DefaultSocketPathIsFreshAndPrivate) {
    TempDir runtime;
    const char* old = std::getenv("XDG_RUNTIME_DIR");
    std::string saved = old ? old : "";
    ::setenv("XDG_RUNTIME_DIR", runtime.path().c_str(), 1);
    std::string a = default_socket_path();
    std::string b = default_socket_path();
    if (old)
        ::setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
    else
        ::unsetenv("XDG_RUNTIME_DIR");

    EXPECT_EQ(a.rfind(runtime.path() + "/fp8scope/engine-" + std::to_string(::getpid()), 0), 0u) << a;
    EXPECT_NE(a, b);
    struct stat st {};
    ASSERT_EQ(::stat((runtime.path() + "/fp8scope").c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
}

}  // namespace
}  // namespace fp8scope::live::test
