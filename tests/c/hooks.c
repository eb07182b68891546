/* Hooks, rules and the spend cap through the C API, on a host model (no network):
 * - tooloop_agent_set_hook: before_tool denies one call and rewrites another's input, after_tool replaces
 *   a result, before_request sees every request, on_stop keeps the run going once; the order around a call
 *   is rules, before_tool, permission callback, tool, after_tool;
 * - a hook returning non-zero ends the run with TOOLOOP_HOOK_FAILED and the conversation stays valid
 *   (resume goes on);
 * - the config keys "permission_rules", "max_cost_usd" (a run stopped by it returns TOOLOOP_OK with
 *   "stop_reason": "budget") and "instruction_files";
 * - every hook's userdata_free runs exactly once (replace, clear, refused set, agent freed). */
#include "tooloop.h"

#include "check.h"

typedef struct {
    int calls;
    char log[2048];
} trace;

static void note(trace *t, const char *what) {
    strncat(t->log, what, sizeof t->log - strlen(t->log) - 1);
    strncat(t->log, ";", sizeof t->log - strlen(t->log) - 1);
}

static const char *TURN1 =
    "{\"content\": [{\"type\": \"tool_use\", \"id\": \"c1\", \"name\": \"look\", \"input\": {\"n\": 1}},"
    "{\"type\": \"tool_use\", \"id\": \"c2\", \"name\": \"look\", \"input\": {\"n\": 2}},"
    "{\"type\": \"tool_use\", \"id\": \"c3\", \"name\": \"look\", \"input\": {\"n\": 3}},"
    "{\"type\": \"tool_use\", \"id\": \"c4\", \"name\": \"rm\", \"input\": {}}],"
    " \"stop_reason\": \"tool_use\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 5}}";

static int32_t model(void *userdata, const char *request_json, tooloop_model_response *response) {
    trace *t = (trace *)userdata;
    t->calls++;
    if (t->calls == 1) {
        return tooloop_model_response_set_json(response, TURN1) == TOOLOOP_OK ? 0 : 1;
    }
    if (t->calls == 2) {
        CHECK_CONTAINS(request_json, "{\"type\":\"tool_result\",\"tool_use_id\":\"c1\",\"content\":\"REPLACED\"}");
        CHECK_CONTAINS(request_json, "not this one");
        CHECK_CONTAINS(request_json, "{\"type\":\"tool_result\",\"tool_use_id\":\"c3\",\"content\":\"saw {\\\"n\\\":30}\"}");
        CHECK_CONTAINS(request_json, "the rule rm forbids this call");
    }
    return tooloop_model_response_set_json(
               response, "{\"content\": [{\"type\": \"text\", \"text\": \"done\"}], \"stop_reason\": \"end_turn\","
                         " \"usage\": {\"input_tokens\": 10, \"output_tokens\": 5}}") == TOOLOOP_OK
               ? 0
               : 1;
}

static int32_t look(void *userdata, const char *input_json, tooloop_tool_result *result) {
    char buf[128];
    note((trace *)userdata, "tool");
    snprintf(buf, sizeof buf, "saw %s", input_json);
    tooloop_tool_result_set_text(result, buf);
    return 0;
}

static int32_t permission(void *userdata, const char *call_json, tooloop_permission *answer) {
    (void)call_json;
    (void)answer;
    note((trace *)userdata, "permission");
    return 0;
}

typedef struct {
    trace *t;
    int freed;
    int fail;
    int stops;
} hook_state;

static void hook_free(void *userdata) { ((hook_state *)userdata)->freed++; }

static int32_t before_tool(void *userdata, const char *event_json, tooloop_hook_result *result) {
    hook_state *h = (hook_state *)userdata;
    note(h->t, "before");
    if (h->fail) {
        return 7;
    }
    if (strstr(event_json, "\"n\":2")) {
        CHECK_STATUS(tooloop_hook_result_set_text(result, "x"), TOOLOOP_INVALID_ARGUMENT); /* not for before_tool */
        CHECK_STATUS(tooloop_hook_result_set_error(result, "not this one"), TOOLOOP_OK);
    }
    if (strstr(event_json, "\"n\":3")) {
        CHECK_STATUS(tooloop_hook_result_set_input(result, "[1]"), TOOLOOP_INVALID_ARGUMENT);
        CHECK_STATUS(tooloop_hook_result_set_input(result, "{\"n\": 30}"), TOOLOOP_OK);
    }
    return 0;
}

static int32_t after_tool(void *userdata, const char *event_json, tooloop_hook_result *result) {
    hook_state *h = (hook_state *)userdata;
    note(h->t, "after");
    CHECK_CONTAINS(event_json, "\"content\":\"saw");
    if (strstr(event_json, "\"id\":\"c1\"")) {
        CHECK_STATUS(tooloop_hook_result_set_text(result, "REPLACED"), TOOLOOP_OK);
    }
    return 0;
}

static int32_t before_request(void *userdata, const char *event_json, tooloop_hook_result *result) {
    (void)result;
    CHECK_CONTAINS(event_json, "\"messages\":[");
    note(((hook_state *)userdata)->t, "request");
    return 0;
}

static int32_t on_stop(void *userdata, const char *event_json, tooloop_hook_result *result) {
    hook_state *h = (hook_state *)userdata;
    CHECK_CONTAINS(event_json, "\"text\":\"done\"");
    if (h->stops++ == 0) {
        CHECK_STATUS(tooloop_hook_result_set_text(result, "are you sure?"), TOOLOOP_OK);
    }
    return 0;
}

int main(void) {
    trace t;
    memset(&t, 0, sizeof t);
    tooloop_agent *agent = NULL;
    CHECK_STATUS(tooloop_agent_new_with_model("{\"permission_rules\": {\"deny\": [\"rm\"]}}", model, &t, NULL, &agent),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "look", "Look.", "{\"type\": \"object\"}", look, &t, NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "rm", "Remove.", "{\"type\": \"object\"}", look, &t, NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_permission(agent, permission, &t, NULL), TOOLOOP_OK);

    hook_state hb = {&t, 0, 0, 0}, ha = {&t, 0, 0, 0}, hr = {&t, 0, 0, 0}, hs = {&t, 0, 0, 0}, spare = {&t, 0, 0, 0};
    /* Refused sets free their userdata at once. */
    CHECK_STATUS(tooloop_agent_set_hook(agent, "after_call", before_tool, &spare, hook_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("unknown hook kind");
    CHECK_STATUS(tooloop_agent_set_hook(NULL, "before_tool", before_tool, &spare, hook_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK(spare.freed == 2);
    /* Set, replace (the replaced one is freed), clear and set again. */
    CHECK_STATUS(tooloop_agent_set_hook(agent, "before_tool", before_tool, &spare, hook_free), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "before_tool", before_tool, &hb, hook_free), TOOLOOP_OK);
    CHECK(spare.freed == 3);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "after_tool", after_tool, &spare, hook_free), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "after_tool", NULL, NULL, NULL), TOOLOOP_OK);
    CHECK(spare.freed == 4);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "after_tool", after_tool, &ha, hook_free), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "before_request", before_request, &hr, hook_free), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "on_stop", on_stop, &hs, hook_free), TOOLOOP_OK);

    char *result = NULL;
    CHECK_STATUS(tooloop_agent_run(agent, "go", NULL, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"text\":\"done\"");
    CHECK_CONTAINS(result, "\"turns\":3");
    tooloop_string_free(result);
    /* rules first (rm never reaches a hook), then before_tool, permission, tool, after_tool. */
    CHECK_CONTAINS(t.log, "request;before;permission;tool;after;before;before;permission;tool;after;request;request;");
    CHECK(hs.stops == 2);

    /* A hook returning non-zero ends the run with TOOLOOP_HOOK_FAILED; the conversation stays valid. */
    t.calls = 0;
    hb.fail = 1;
    result = NULL;
    CHECK_STATUS(tooloop_agent_run(agent, "again", NULL, NULL, &result), TOOLOOP_HOOK_FAILED);
    CHECK_LAST_ERROR("before_tool");
    CHECK(result == NULL);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "before_tool", NULL, NULL, NULL), TOOLOOP_OK);
    CHECK(hb.freed == 1);
    hs.stops = 1;
    CHECK_STATUS(tooloop_agent_resume(agent, NULL, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"text\":\"done\"");
    tooloop_string_free(result);
    tooloop_agent_free(agent);
    CHECK(ha.freed == 1 && hr.freed == 1 && hs.freed == 1 && spare.freed == 4);

    /* max_cost_usd: a stopped run is not an error; the result says "budget". */
    memset(&t, 0, sizeof t);
    CHECK_STATUS(tooloop_agent_new_with_model("{\"model\": \"claude-sonnet-4-6\", \"max_cost_usd\": 0.000001}", model,
                                              &t, NULL, &agent),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "go", NULL, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"stop_reason\":\"budget\"");
    CHECK(t.calls == 0);
    tooloop_string_free(result);
    tooloop_agent_free(agent);
    CHECK_STATUS(tooloop_agent_new_with_model("{\"model\": \"my-llama\", \"max_cost_usd\": 1}", model, &t, NULL, &agent),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("max_cost_usd");
    CHECK_STATUS(tooloop_agent_new_with_model("{\"permission_rules\": {\"allow\": [\"bash(\"]}}", model, &t, NULL, &agent),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("permission_rules");
    CHECK_STATUS(tooloop_agent_new_with_model("{\"instruction_files\": [\"/nonexistent/AGENTS.md\"]}", model, &t, NULL,
                                              &agent),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("instruction_files");
    CHECK_STATUS(tooloop_agent_new_with_model("{\"instruction_files\": true}", model, &t, NULL, &agent), TOOLOOP_OK);
    tooloop_agent_free(agent);

    return check_exit("hooks");
}
