/* A run stepped by the host (tooloop_agent_start / tooloop_run_step) with approvals as pauses
 * (TOOLOOP_RUN_PAUSE_FOR_APPROVAL), against the mock server (tests/scenarios/c_run_steps.json):
 * - run 1: the model calls delete_files; the run pauses, the host reads the waiting call, is refused on bad
 *   answers (NULL and invalid UTF-8 ids, an unknown id, an unknown decision, a result before the end),
 *   approves it; the tool runs once and the run ends; stepping or answering after the end is
 *   TOOLOOP_RUN_ENDED;
 * - run 2: denied with a reason: the tool never runs, the model reads the reason;
 * - run 3: freed while paused: the call is answered as interrupted, the agent is free again;
 * - run 4: cancelled while paused: the next step ends the run, tooloop_run_result says TOOLOOP_CANCELLED;
 * - run 5: freed after its first step (mid-run);
 * - run 6: a blocking tooloop_agent_run on the conversation all that left: valid, answered.
 * Every step's events go to a step-local callback; nothing here lends tooloop a thread. */
#include "tooloop.h"

#include "check.h"

typedef struct {
    int calls;
} counter;

static int32_t delete_files(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)input_json;
    ((counter *)userdata)->calls++;
    tooloop_tool_result_set_text(result, "deleted");
    return 0;
}

typedef struct {
    int tool_uses;
    int approvals;
    int results;
} event_count;

static void on_event(void *userdata, const tooloop_event *ev) {
    event_count *n = (event_count *)userdata;
    if (ev->type == TOOLOOP_EVENT_TOOL_USE) n->tool_uses++;
    if (ev->type == TOOLOOP_EVENT_APPROVAL_REQUEST) n->approvals++;
    if (ev->type == TOOLOOP_EVENT_TOOL_RESULT) n->results++;
}

/* Step `run` until it pauses or ends; returns the kind it stopped at (-1 on a failed step). */
static tooloop_step_kind step_until_stop(tooloop_run *run, event_count *events, int *steps) {
    for (;;) {
        tooloop_step_kind kind = -1;
        tooloop_status s = tooloop_run_step(run, on_event, events, &kind);
        if (s != TOOLOOP_OK) {
            fprintf(stderr, "tooloop_run_step: %d %s\n", (int)s, tooloop_last_error());
            return -1;
        }
        (*steps)++;
        if (kind != TOOLOOP_STEP_CONTINUE) return kind;
    }
}

static char *messages(tooloop_agent *agent) {
    char *json = NULL;
    CHECK_STATUS(tooloop_agent_messages_json(agent, &json), TOOLOOP_OK);
    return json;
}

int main(void) {
    tooloop_agent *agent = NULL;
    tooloop_run *run = NULL, *unused = NULL;
    counter deletes = {0};
    event_count events = {0, 0, 0};
    tooloop_step_kind kind = 99;
    char *pending = NULL, *id = NULL, *result = NULL, *view = NULL;
    int steps = 0;

    require_env("TOOLOOP_MOCK_URL");
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0}", &agent), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "delete_files", "Delete files under a path.",
                                        "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}",
                                        delete_files, &deletes, NULL),
                 TOOLOOP_OK);

    /* Bad starts write nothing. */
    CHECK_STATUS(tooloop_agent_start(NULL, "hi", 0, &run), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_start(agent, "hi", 0, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_start(agent, "bad \xff input", 0, &run), TOOLOOP_INVALID_UTF8);
    CHECK_STATUS(tooloop_agent_start(agent, "hi", 0x80, &run), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("flags");
    CHECK_STATUS(tooloop_agent_start(agent, NULL, 0, &run), TOOLOOP_CONFIG); /* nothing to resume */
    CHECK(run == NULL);

    /* Run 1: paused, approved. */
    CHECK_STATUS(tooloop_agent_start(agent, "Clean up build/.", TOOLOOP_RUN_PAUSE_FOR_APPROVAL, &run), TOOLOOP_OK);
    CHECK(run != NULL);
    CHECK_STATUS(tooloop_agent_start(agent, "again", 0, &unused), TOOLOOP_BUSY); /* the run holds the agent */
    CHECK_STATUS(tooloop_run_step(NULL, NULL, NULL, &kind), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_run_step(run, NULL, NULL, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_run_result(run, &result), TOOLOOP_RUN_NOT_ENDED);
    CHECK(result == NULL);
    CHECK(step_until_stop(run, &events, &steps) == TOOLOOP_STEP_NEEDS_APPROVAL);
    CHECK(events.tool_uses == 1 && events.approvals == 1 && events.results == 0);
    CHECK(deletes.calls == 0);
    CHECK_STATUS(tooloop_run_pending_approvals(run, &pending), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(pending, "/0/call_id", &id), TOOLOOP_OK);
    CHECK(id != NULL && strcmp(id, "toolu_step_1") == 0);
    CHECK_CONTAINS(pending, "\"tool\":\"delete_files\"");
    CHECK_CONTAINS(pending, "\"input\":{\"path\":\"build/\"}");
    tooloop_string_free(pending);
    pending = NULL;
    /* Stepping without an answer runs nothing and pauses again. */
    CHECK_STATUS(tooloop_run_step(run, on_event, &events, &kind), TOOLOOP_OK);
    CHECK(kind == TOOLOOP_STEP_NEEDS_APPROVAL && deletes.calls == 0);
    /* Bad answers. */
    CHECK_STATUS(tooloop_run_approve(NULL, id, TOOLOOP_DECISION_ALLOW, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_run_approve(run, NULL, TOOLOOP_DECISION_ALLOW, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_run_approve(run, "toolu_\xff", TOOLOOP_DECISION_ALLOW, NULL), TOOLOOP_INVALID_UTF8);
    CHECK_STATUS(tooloop_run_approve(run, "toolu_nope", TOOLOOP_DECISION_ALLOW, NULL), TOOLOOP_UNKNOWN_CALL);
    CHECK_LAST_ERROR("toolu_nope");
    CHECK_STATUS(tooloop_run_approve(run, id, 7, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_run_approve(run, id, TOOLOOP_DECISION_DENY, "bad \xff reason"), TOOLOOP_INVALID_UTF8);
    CHECK_STATUS(tooloop_run_approve(run, id, TOOLOOP_DECISION_ALLOW, NULL), TOOLOOP_OK);
    CHECK(step_until_stop(run, &events, &steps) == TOOLOOP_STEP_DONE);
    CHECK(deletes.calls == 1 && events.results == 1);
    CHECK_STATUS(tooloop_run_result(run, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"text\":\"Deleted build/.\"");
    tooloop_string_free(result);
    result = NULL;
    CHECK_STATUS(tooloop_run_result(run, NULL), TOOLOOP_OK); /* again, not wanted */
    CHECK_STATUS(tooloop_run_step(run, on_event, &events, &kind), TOOLOOP_RUN_ENDED);
    CHECK_STATUS(tooloop_run_approve(run, id, TOOLOOP_DECISION_ALLOW, NULL), TOOLOOP_RUN_ENDED);
    CHECK_STATUS(tooloop_run_pending_approvals(run, &pending), TOOLOOP_OK);
    CHECK(pending != NULL && strcmp(pending, "[]") == 0);
    tooloop_string_free(pending);
    pending = NULL;
    tooloop_string_free(id);
    id = NULL;
    tooloop_run_free(run);
    run = NULL;

    /* Run 2: denied with a reason. */
    CHECK_STATUS(tooloop_agent_start(agent, "Clean up dist/.", TOOLOOP_RUN_PAUSE_FOR_APPROVAL, &run), TOOLOOP_OK);
    CHECK(step_until_stop(run, &events, &steps) == TOOLOOP_STEP_NEEDS_APPROVAL);
    CHECK_STATUS(tooloop_run_approve(run, "toolu_step_2", TOOLOOP_DECISION_DENY, "dist/ is the release"), TOOLOOP_OK);
    CHECK(step_until_stop(run, &events, &steps) == TOOLOOP_STEP_DONE);
    CHECK(deletes.calls == 1);
    CHECK_STATUS(tooloop_run_result(run, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"denied\":true");
    tooloop_string_free(result);
    result = NULL;
    tooloop_run_free(run);
    run = NULL;
    view = messages(agent);
    CHECK_CONTAINS(view, "Permission denied: dist/ is the release");
    tooloop_string_free(view);

    /* Run 3: freed while paused. */
    CHECK_STATUS(tooloop_agent_start(agent, "Clean up tmp/.", TOOLOOP_RUN_PAUSE_FOR_APPROVAL, &run), TOOLOOP_OK);
    CHECK(step_until_stop(run, &events, &steps) == TOOLOOP_STEP_NEEDS_APPROVAL);
    tooloop_run_free(run);
    run = NULL;
    CHECK(deletes.calls == 1);
    view = messages(agent);
    CHECK_CONTAINS(view, "\"tool_use_id\":\"toolu_step_3\"");
    CHECK_CONTAINS(view, "interrupted");
    tooloop_string_free(view);

    /* Run 4: cancelled while paused. */
    CHECK_STATUS(tooloop_agent_start(agent, "Clean up out/.", TOOLOOP_RUN_PAUSE_FOR_APPROVAL, &run), TOOLOOP_OK);
    CHECK(step_until_stop(run, &events, &steps) == TOOLOOP_STEP_NEEDS_APPROVAL);
    CHECK_STATUS(tooloop_run_cancel(NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_run_cancel(run), TOOLOOP_OK);
    CHECK(step_until_stop(run, &events, &steps) == TOOLOOP_STEP_DONE);
    CHECK_STATUS(tooloop_run_result(run, &result), TOOLOOP_CANCELLED);
    CHECK(result == NULL);
    CHECK_STATUS(tooloop_run_cancel(run), TOOLOOP_OK); /* after the end: nothing */
    tooloop_run_free(run);
    run = NULL;
    CHECK(deletes.calls == 1);
    view = messages(agent);
    CHECK_CONTAINS(view, "\"tool_use_id\":\"toolu_step_4\"");
    tooloop_string_free(view);

    /* Run 5: freed after its first step. */
    CHECK_STATUS(tooloop_agent_start(agent, "Clean up cache/.", 0, &run), TOOLOOP_OK);
    CHECK_STATUS(tooloop_run_step(run, on_event, &events, &kind), TOOLOOP_OK);
    tooloop_run_free(run);
    run = NULL;
    tooloop_run_free(NULL); /* a no-op */
    CHECK(deletes.calls == 1);

    /* Run 6: the conversation all that left is valid and goes on. */
    CHECK_STATUS(tooloop_agent_run(agent, "Anything else?", NULL, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "Nothing else to delete.");
    tooloop_string_free(result);
    CHECK(deletes.calls == 1);

    tooloop_agent_free(agent);
    printf("%d steps\n", steps);
    return check_exit("run_steps");
}
