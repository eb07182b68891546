// The C++ wrapper include/tooloop.hpp: RAII agents, std::function tools and models, events, exceptions.
// Part 1 runs against the mock server (tests/scenarios/c_two_tools.json); part 2 uses a fake model.
#include "tooloop.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "workers.h"

namespace {

struct EventFailure {
    int code;
};

const char *const TOOL_CALL = R"({"content": [{"type": "tool_use", "id": "toolu_x1", "name": "%s", "input": {}}],
                                  "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 2}})";

std::string tool_call(const char *name) {
    char buf[512];
    std::snprintf(buf, sizeof buf, TOOL_CALL, name);
    return buf;
}

std::string final_text(const std::string &text) {
    return R"({"content": [{"type": "text", "text": ")" + text + R"("}], "stop_reason": "end_turn"})";
}

void network_loop() {
    std::string streamed;
    std::vector<std::string> tool_uses;
    auto clock_calls = std::make_shared<int>(0);
    {
        tooloop::Agent agent(R"({"model": "claude-sonnet-4-6", "max_retries": 0})");
        agent.add_tool("get_weather", "Weather in a city.",
                       R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})",
                       [](const std::string &input) {
                           return "18 C in " + tooloop::json_get(input, "/city").value_or("?");
                       });
        agent.add_tool("get_time", "Time in a timezone.", R"({"type": "object"})",
                       [clock_calls](const std::string &) {
                           ++*clock_calls;
                           return std::string("14:05");
                       });
        // Duplicate names throw, with the status.
        try {
            agent.add_tool("get_time", "again", "{}", [](const std::string &) { return std::string(); });
            CHECK(!"a duplicate tool did not throw");
        } catch (const tooloop::Error &e) {
            CHECK(e.status() == TOOLOOP_DUPLICATE_TOOL);
            CHECK_CONTAINS(e.what(), "already registered");
        }

        tooloop::Agent moved = std::move(agent); // RAII handles move; the old one is empty
        CHECK(agent.get() == nullptr && moved.get() != nullptr);
        CHECK(moved.context_window() == 200000);

        tooloop::RunResult r = moved.run("Weather and time in Paris?", [&](const tooloop::Event &e) {
            if (e.type == TOOLOOP_EVENT_TEXT) streamed += e.text;
            if (e.type == TOOLOOP_EVENT_TOOL_USE) tool_uses.push_back(tooloop::json_get(e.json, "/name").value_or(""));
        });
        CHECK(r.text == "In Paris it is 18 \xc2\xb0" "C and sunny, and the time is 14:05.");
        CHECK(r.stop_reason == "end_turn");
        CHECK(r.output_json == "null");
        CHECK(r.turns == 2);
        CHECK_CONTAINS(r.json.c_str(), "\"tool_calls\":[");
        CHECK(streamed.find("I'll check the weather") == 0);
        CHECK(tool_uses.size() == 2 && tool_uses[0] == "get_weather" && tool_uses[1] == "get_time");
        CHECK(*clock_calls == 1);
        // Keep each string alive while it is checked (CHECK_CONTAINS holds a pointer into it).
        const std::string messages = moved.messages_json(), usage = moved.usage_json(), history = moved.history_json();
        CHECK_CONTAINS(messages.c_str(), "\"content\":\"18 C in Paris\"");
        CHECK_CONTAINS(usage.c_str(), "\"input_tokens\":920");
        CHECK_CONTAINS(history.c_str(), "\"status\":\"complete\"");
        CHECK(clock_calls.use_count() == 2); // the tool still holds its copy
    }
    CHECK(clock_calls.use_count() == 1); // freed with the agent
}

void fake_model() {
    // A model that calls the tool named in the user's message, then answers with what the tool said.
    auto requests = std::make_shared<std::vector<std::string>>();
    tooloop::ModelFn model = [requests](const std::string &request) -> std::string {
        requests->push_back(request);
        std::string first_user = tooloop::json_get(request, "/messages/0/content/0/text").value_or("");
        if (first_user == "throw from the model") throw std::logic_error("the model gave up");
        if (!tooloop::json_get(request, "/messages/1").has_value()) return tool_call(first_user.c_str());
        return final_text("tool said: " + tooloop::json_get(request, "/messages/2/content/0/content").value_or("?"));
    };
    tooloop::Agent agent(R"({"model": "fake"})", model);
    // A host model: no window known, tokens estimated locally (no request), nothing to compact yet.
    CHECK(agent.context_window() == 0);
    CHECK(agent.count_tokens("how big is this?") > 0);
    CHECK(agent.compact() == "null");
    agent.add_tool("fails", "Throws.", "{}", [](const std::string &) -> std::string {
        throw std::runtime_error("no network in tests");
    });
    agent.add_tool("aborts", "Aborts the run.", "{}", [](const std::string &) -> std::string {
        throw tooloop::AbortRun("stop everything");
    });
    agent.add_tool("fine", "Works.", "{}", [](const std::string &) { return std::string("all good"); });

    // A tool's std::exception becomes an error result the model reads; the run goes on.
    tooloop::RunResult r = agent.run("fails");
    CHECK(r.text == "tool said: no network in tests");
    CHECK_CONTAINS(requests->back().c_str(), "\"content\":\"no network in tests\",\"is_error\":true");

    // AbortRun ends the run: Error with TOOLOOP_TOOL_ABORTED naming the tool.
    agent.reset();
    try {
        agent.run("aborts");
        CHECK(!"AbortRun did not end the run");
    } catch (const tooloop::Error &e) {
        CHECK(e.status() == TOOLOOP_TOOL_ABORTED);
        CHECK_CONTAINS(e.what(), "tool 'aborts' aborted the run");
        CHECK_CONTAINS(e.what(), "stop everything");
    }

    // An event function that throws cancels the run, and run() rethrows its exception unchanged.
    agent.reset();
    int events_after_throw = 0;
    bool thrown = false;
    try {
        agent.run("fine", [&](const tooloop::Event &e) {
            if (thrown) events_after_throw++;
            if (e.type == TOOLOOP_EVENT_TOOL_USE) {
                thrown = true;
                throw EventFailure{7};
            }
        });
        CHECK(!"the event exception was swallowed");
    } catch (const EventFailure &f) {
        CHECK(f.code == 7);
    }
    CHECK(events_after_throw == 0); // no event reaches a function that has thrown
    // The conversation is valid and resumable after that cancel.
    r = agent.resume();
    CHECK(r.text.find("tool said:") == 0);

    // The model's own exception comes out of run() unchanged too.
    agent.reset();
    try {
        agent.run("throw from the model");
        CHECK(!"the model exception was swallowed");
    } catch (const std::logic_error &e) {
        CHECK(std::string(e.what()) == "the model gave up");
    }

    // Errors from C calls carry the status and the detail.
    try {
        tooloop::Agent bad(R"({"model": "m", "stream": 1})");
        CHECK(!"a bad config did not throw");
    } catch (const tooloop::Error &e) {
        CHECK(e.status() == TOOLOOP_INVALID_ARGUMENT);
        CHECK_CONTAINS(e.what(), "\"stream\": must be true or false");
    }
    try {
        tooloop::Agent bad(R"({"provider": "openai"})", model);
        CHECK(!"a network provider with a host model did not throw");
    } catch (const tooloop::Error &e) {
        CHECK(e.status() == TOOLOOP_INVALID_ARGUMENT);
    }
    try {
        agent.open_session("/proc/tooloop-cannot-write/session.jsonl");
        CHECK(!"open_session on an impossible path did not throw");
    } catch (const tooloop::Error &e) {
        CHECK(e.status() == TOOLOOP_CONFIG || e.status() == TOOLOOP_IO);
    }
}

/* Structured output: "output_schema" in the config, the validated answer as RunResult::output_json. */
void structured_output() {
    tooloop::Agent typed(R"({"model": "fake", "output_schema": {"type": "object",
                             "properties": {"n": {"type": "integer"}}, "required": ["n"]}})",
                         [](const std::string &) {
                             return std::string(R"({"content": [{"type": "text", "text": "{\"n\": 7}"}]})");
                         });
    tooloop::RunResult r = typed.run("a number");
    CHECK(r.output_json == "{\"n\":7}");
}

} // namespace

int main() {
    require_env("TOOLOOP_MOCK_URL");
    try {
        network_loop();
        fake_model();
        structured_output();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "unexpected exception: %s\n", e.what());
        check_failures++;
    }
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("wrapper");
}
