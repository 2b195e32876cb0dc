// This machine's host name ("unknown" when it cannot be read): traces and health reports
// say where a run ran.
#pragma once

#include <unistd.h>

#include <string>

namespace fp8scope {

inline std::string host_name() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
    return buf;
}

}  // namespace fp8scope
