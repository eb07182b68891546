// include/tooloop.h compiles on its own as C++17 -pedantic -Wall -Wextra -Werror, with C linkage for its
// functions (callable and linkable from C++).
#include "tooloop.h"

#include <cstdio>
#include <cstring>

int main() {
    tooloop_agent *agent = nullptr;
    tooloop_status s = tooloop_agent_new(nullptr, &agent);
    int failures = 0;
    if (s != TOOLOOP_INVALID_ARGUMENT || agent != nullptr) {
        std::fprintf(stderr, "tooloop_agent_new(NULL) returned %d\n", static_cast<int>(s));
        failures++;
    }
    if (std::strstr(tooloop_last_error(), "config_json is NULL") == nullptr) {
        std::fprintf(stderr, "unexpected last error: %s\n", tooloop_last_error());
        failures++;
    }
    tooloop_agent_free(nullptr);
    std::printf("header_cpp: %s (tooloop %s)\n", failures ? "FAILED" : "all checks passed", tooloop_version());
    return failures ? 1 : 0;
}
