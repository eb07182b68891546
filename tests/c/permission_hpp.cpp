// The permission hook of the C++ wrapper (tooloop::Agent::set_permission) against the mock server
// (tests/scenarios/c_permission.json, the same three runs as permission.c):
// - run 1: delete_files denied with a reason, list_files allowed (the hook sees id, name and input);
// - run 2: denied with an empty string: the default reason;
// - run 3: a hook that throws: the call is denied, the run cancelled, run() rethrows the hook's exception;
//   then the hook is cleared and resume() finishes the conversation.
// Each replaced hook's std::function is destroyed by the replacing call; the last one with the agent.
#include "tooloop.hpp"

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "check.h"
#include "workers.h"

namespace {

const char *const REASON = "deleting files needs the user's approval";
const char *const PATH_SCHEMA = R"({"properties": {"path": {"type": "string"}}})";

struct PolicyDown : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void permission_hook() {
    auto deleted = std::make_shared<int>(0), listed = std::make_shared<int>(0);
    auto first_token = std::make_shared<int>(0), second_token = std::make_shared<int>(0),
         third_token = std::make_shared<int>(0);
    std::weak_ptr<int> first = first_token, second = second_token, third = third_token;
    std::string seen;
    int busy_status = 0;
    {
        tooloop::Agent agent(R"({"model": "claude-sonnet-4-6", "max_retries": 0})");
        agent.add_tool("delete_files", "Delete files.", PATH_SCHEMA, [deleted](const std::string &) {
            ++*deleted;
            return std::string("deleted");
        });
        agent.add_tool("list_files", "List files.", PATH_SCHEMA, [listed](const std::string &) {
            ++*listed;
            return std::string("a.txt\nb.txt");
        });

        // Run 1: a reason.
        tooloop::Agent *self = &agent;
        agent.set_permission([token = std::move(first_token), &seen, &busy_status,
                              self](const tooloop::ToolCall &call) -> std::optional<std::string> {
            seen += call.id + " " + call.name + " " + tooloop::json_get(call.input_json, "/path").value_or("?") + ";";
            CHECK_CONTAINS(call.json.c_str(), "\"id\":\"toolu_perm_");
            // No changing the hook during a run; the refused function is freed by the library.
            try {
                self->set_permission([](const tooloop::ToolCall &) { return std::optional<std::string>(); });
            } catch (const tooloop::Error &e) {
                busy_status = e.status();
            }
            if (call.name == "delete_files") return std::string(REASON);
            return std::nullopt;
        });
        tooloop::RunResult r = agent.run("Clean up the build folder.");
        CHECK(*deleted == 0 && *listed == 1);
        CHECK(seen == "toolu_perm_delete delete_files build/;toolu_perm_list list_files .;");
        CHECK(busy_status == TOOLOOP_BUSY);
        CHECK(r.text == "I was not allowed to delete build/; the folder holds a.txt and b.txt.");
        std::string messages = agent.messages_json();
        CHECK(tooloop::json_get(messages, "/2/content/0/content") == std::string("Permission denied: ") + REASON);
        CHECK(tooloop::json_get(messages, "/2/content/0/is_error") == std::string("true"));
        CHECK(tooloop::json_get(messages, "/2/content/1/content") == std::string("a.txt\nb.txt"));

        // Run 2: an empty reason gives the default one. Replacing destroys the first function.
        CHECK(!first.expired());
        agent.set_permission([token = std::move(second_token)](const tooloop::ToolCall &call) {
            return call.name == "delete_files" ? std::optional<std::string>("") : std::nullopt;
        });
        CHECK(first.expired() && !second.expired());
        agent.run("Try again.");
        CHECK(*deleted == 0);
        messages = agent.messages_json();
        CHECK(tooloop::json_get(messages, "/6/content/0/content") ==
              std::string("Permission denied: the host denied this tool call"));

        // Run 3: a hook that throws cancels the run; run() rethrows its exception, not a tooloop::Error.
        agent.set_permission([token = std::move(third_token)](const tooloop::ToolCall &) -> std::optional<std::string> {
            throw PolicyDown("the policy server is down");
        });
        CHECK(second.expired() && !third.expired());
        try {
            agent.run("Now you may.");
            CHECK(!"run() did not rethrow the hook's exception");
        } catch (const PolicyDown &e) {
            CHECK_CONTAINS(e.what(), "the policy server is down");
        } catch (const std::exception &e) {
            CHECK(!"run() threw something else than the hook's exception");
            std::fprintf(stderr, "it threw: %s\n", e.what());
        }
        CHECK(*deleted == 0);
        messages = agent.messages_json();
        CHECK(tooloop::json_get(messages, "/10/content/0/content") ==
              std::string("Permission denied: the permission check failed"));
        CHECK(!tooloop::json_get(messages, "/11")); // cancelled: the model was not asked again

        // Cleared: resume finishes the conversation without rethrowing the old exception.
        agent.set_permission(nullptr);
        CHECK(third.expired());
        tooloop::RunResult done = agent.resume();
        CHECK(done.text == "Deleted build/.");
        CHECK(*deleted == 0 && *listed == 1);

        // The last hook goes with the agent.
        auto last_token = std::make_shared<int>(0);
        std::weak_ptr<int> last = last_token;
        agent.set_permission([token = std::move(last_token)](const tooloop::ToolCall &) { return std::nullopt; });
        CHECK(!last.expired());
        tooloop::Agent moved = std::move(agent);
        CHECK(!last.expired());
        {
            tooloop::Agent gone = std::move(moved);
        }
        CHECK(last.expired());
    }
    CHECK(deleted.use_count() == 1 && listed.use_count() == 1);
}

} // namespace

int main() {
    require_env("TOOLOOP_MOCK_URL");
    try {
        permission_hook();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "unexpected exception: %s\n", e.what());
        check_failures++;
    }
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("permission_hpp");
}
