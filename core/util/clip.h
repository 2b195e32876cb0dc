// Text from a file or a command line quoted in an error message is cut to a few dozen
// characters: a 100 MB tensor name or a 400 KB override must not become the message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fp8scope {

inline std::string clip(std::string_view text, std::size_t max_chars = 80) {
    if (text.size() <= max_chars) return std::string(text);
    return std::string(text.substr(0, max_chars - 3)) + "...";
}

}  // namespace fp8scope
