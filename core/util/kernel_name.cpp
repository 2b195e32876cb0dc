#include "util/kernel_name.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace fp8scope {

std::string kernel_display_name(const char* mangled) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                     std::free);
    std::string s = status == 0 && demangled ? demangled.get() : mangled;
    if (s.rfind("void ", 0) == 0) s.erase(0, 5);
    // The parameter list: the first '(' outside template brackets.
    int depth = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '<') ++depth;
        else if (s[i] == '>') --depth;
        else if (s[i] == '(' && depth == 0 && i > 0) {
            // "(anonymous namespace)" is part of the name, not a parameter list.
            if (s.compare(i, 21, "(anonymous namespace)") == 0) {
                i += 20;
                continue;
            }
            s.resize(i);
            break;
        }
    }
    return s;
}

}  // namespace fp8scope
