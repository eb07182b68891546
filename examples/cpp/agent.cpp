// A minimal tooloop agent in C++ (include/tooloop.hpp): one tool (get_time), streamed output.
//
// Build (from the repository root, one line):
//   cargo build -p tooloop-capi --release && mkdir -p examples/cpp/build && c++ -std=c++17 -Wall -Wextra -Iinclude examples/cpp/agent.cpp -Ltarget/release -ltooloop -Wl,-rpath,"$PWD/target/release" -o examples/cpp/build/agent
// or, with pkg-config (after `make -C bindings/c`):
//   c++ -std=c++17 examples/cpp/agent.cpp $(PKG_CONFIG_PATH=target/release/pkgconfig pkg-config --cflags --libs tooloop) -o examples/cpp/build/agent
//
// Run:
//   ANTHROPIC_API_KEY=sk-ant-... examples/cpp/build/agent "What time is it?"
// or without a network, against the mock server:
//   python3 tests/mock/mockctl.py run tests/scenarios/c_example_time.json -- examples/cpp/build/agent
#include <chrono>
#include <ctime>
#include <iostream>
#include <stdexcept>
#include <string>

#include "tooloop.hpp"

int main(int argc, char **argv) {
    std::string prompt = argc > 1 ? argv[1] : "What time is it?";
    try {
        // The API key and base URL come from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL.
        tooloop::Agent agent(R"({"model": "claude-sonnet-4-6", "system": "You are brief.", "max_turns": 5})");

        agent.add_tool("get_time", "Get the current date and time.",
                       R"({"type": "object", "properties": {"utc": {"type": "boolean"}}})",
                       [](const std::string &input_json) {
                           bool utc = tooloop::json_get(input_json, "/utc").value_or("false") == "true";
                           std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
                           std::tm *t = utc ? std::gmtime(&now) : std::localtime(&now);
                           char text[64];
                           if (t == nullptr || std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", t) == 0) {
                               throw std::runtime_error("the clock is unavailable"); // the model reads this
                           }
                           return std::string(text);
                       });

        tooloop::RunResult result = agent.run(prompt, [](const tooloop::Event &e) {
            if (e.type == TOOLOOP_EVENT_TEXT) std::cout << e.text << std::flush;
            if (e.type == TOOLOOP_EVENT_TURN_END) std::cout << "\n";
            if (e.type == TOOLOOP_EVENT_TOOL_USE) std::cerr << "[tool] " << e.json << "\n";
        });
        std::cerr << "[done] " << result.turns << " turns, stop_reason " << result.stop_reason << ", usage "
                  << agent.usage_json() << "\n";
    } catch (const tooloop::Error &e) {
        std::cerr << "error (" << tooloop_status_str(e.status()) << "): " << e.what() << "\n";
        return 1;
    }
    return 0;
}
