// A stepped run through the C++ wrapper (tooloop::Agent::start, tooloop::Run) against the mock server
// (tests/scenarios/c_run_steps.json, its first three runs): run 1 pauses for delete_files and is allowed;
// run 2 is denied with a reason; run 3 is destroyed while paused (the call answered as interrupted), after
// which a wrong answer throws tooloop::Error with its status.
#include "tooloop.hpp"

#include <memory>
#include <string>
#include <vector>

#include "check.h"

namespace {

const char *const PATH_SCHEMA = R"({"properties": {"path": {"type": "string"}}})";

tooloop::Run::Step until_stop(tooloop::Run &run, int &approvals) {
    for (;;) {
        tooloop::Run::Step s = run.step([&approvals](const tooloop::Event &e) {
            if (e.type == TOOLOOP_EVENT_APPROVAL_REQUEST) approvals++;
        });
        if (s != tooloop::Run::Step::Continue) return s;
    }
}

void stepped_runs() {
    auto deleted = std::make_shared<int>(0);
    int approvals = 0;
    tooloop::Agent agent(R"({"model": "claude-sonnet-4-6", "max_retries": 0})");
    agent.add_tool("delete_files", "Delete files.", PATH_SCHEMA, [deleted](const std::string &) {
        ++*deleted;
        return std::string("deleted");
    });
    {
        tooloop::Run run = agent.start("Clean up build/.");
        CHECK(until_stop(run, approvals) == tooloop::Run::Step::NeedsApproval);
        std::vector<tooloop::ApprovalRequest> asked = run.pending_approvals();
        CHECK(asked.size() == 1 && asked[0].call_id == "toolu_step_1" && asked[0].tool == "delete_files");
        CHECK(asked.size() == 1 && asked[0].input_json == R"({"path":"build/"})" && asked[0].reason.empty());
        int status = 0;
        try {
            run.allow("toolu_nope");
        } catch (const tooloop::Error &e) {
            status = e.status();
        }
        CHECK(status == TOOLOOP_UNKNOWN_CALL);
        run.allow(asked[0].call_id);
        CHECK(until_stop(run, approvals) == tooloop::Run::Step::Done);
        CHECK(run.result().text == "Deleted build/.");
        CHECK(*deleted == 1);
    }
    {
        tooloop::Run run = agent.start("Clean up dist/.");
        CHECK(until_stop(run, approvals) == tooloop::Run::Step::NeedsApproval);
        run.deny("toolu_step_2", "dist/ is the release");
        CHECK(until_stop(run, approvals) == tooloop::Run::Step::Done);
        std::string json = run.result().json;
        CHECK_CONTAINS(json.c_str(), "Permission denied: dist/ is the release");
        CHECK(*deleted == 1);
    }
    {
        tooloop::Run run = agent.start("Clean up tmp/.");
        CHECK(until_stop(run, approvals) == tooloop::Run::Step::NeedsApproval);
    }
    CHECK(approvals == 3);
    CHECK(*deleted == 1);
    std::string view = agent.messages_json();
    CHECK_CONTAINS(view.c_str(), "interrupted");
}

} // namespace

int main() {
    require_env("TOOLOOP_MOCK_URL");
    try {
        stepped_runs();
    } catch (const std::exception &e) {
        fprintf(stderr, "unexpected exception: %s\n", e.what());
        check_failures++;
    }
    return check_exit("run_steps_hpp");
}
