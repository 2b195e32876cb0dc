// An option renamed (a unit added to its name: --rank-timeout became --rank-timeout-s; a
// word made exact: analyze --recipes became --quantizers): the old spelling still sets the
// value, off the help, with a notice on stderr.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

namespace fp8scope::cli {

template <class T, class Value>
CLI::Option* add_renamed_option(CLI::App& cmd, const std::string& old_name, const std::string& new_name, Value& value) {
    return cmd
        .add_option_function<T>(old_name,
                                [&value, old_name, new_name](const T& v) {
                                    std::fprintf(stderr, "fp8scope-engine: %s is deprecated, use %s\n",
                                                 old_name.c_str(), new_name.c_str());
                                    value = v;
                                })
        ->group("");
}

}  // namespace fp8scope::cli
