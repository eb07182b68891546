// include/tooloop.hpp compiles on its own (it is the first include) as C++17 -pedantic -Wall -Wextra
// -Werror, and its free functions work: version(), json_get(), and Error from a failing call.
#include "tooloop.hpp"

#include <cstdio>
#include <cstring>

int main() {
    int failures = 0;
    auto fail = [&](const char *what) {
        std::fprintf(stderr, "hpp_alone: %s\n", what);
        failures++;
    };
    if (tooloop::version() != tooloop_version()) fail("version()");
    if (tooloop::json_get(R"({"a": {"b": [1, "x"]}})", "/a/b/1").value_or("") != "x") fail("json_get string");
    if (tooloop::json_get(R"({"a": {"b": [1, "x"]}})", "/a/b").value_or("") != "[1,\"x\"]") fail("json_get array");
    if (tooloop::json_get(R"({"a": 1})", "/b").has_value()) fail("json_get missing");
    try {
        tooloop::json_get("{not json", "");
        fail("json_get on invalid JSON did not throw");
    } catch (const tooloop::Error &e) {
        if (e.status() != TOOLOOP_INVALID_JSON) fail("json_get status");
        if (std::strstr(e.what(), "tooloop_json_get: json is not valid JSON") == nullptr) fail(e.what());
    }
    try {
        tooloop::Agent agent(R"({"model": "m", "max_tokens": "lots"})");
        fail("a bad config did not throw");
    } catch (const tooloop::Error &e) {
        if (e.status() != TOOLOOP_INVALID_ARGUMENT) fail("bad config status");
        if (std::strstr(e.what(), "\"max_tokens\": must be a positive integer") == nullptr) fail(e.what());
    }
    std::printf("hpp_alone: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
