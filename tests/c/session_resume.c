/* Resume after a failure, and sessions (tests/scenarios/c_tool_fail_resume.json): a tool runs, the next
 * request fails with 529 overloaded -> TOOLOOP_OVERLOADED with the HTTP detail; resume finishes the run
 * without running the tool again. Then the conversation is saved as a session file, loaded into another
 * agent (same API view), appended to through the "session" config key, reset, and bad paths give
 * TOOLOOP_IO. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <unistd.h>

#include "check.h"
#include "workers.h"

static int weather_calls;

static int32_t get_weather(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)userdata;
    weather_calls++;
    CHECK_CONTAINS(input_json, "Oslo");
    tooloop_tool_result_set_text(result, "4 C, rain");
    return 0;
}

/* A host model for the agents that load sessions: says "ok". */
static int32_t ok_model(void *userdata, const char *request_json, tooloop_model_response *response) {
    (void)request_json;
    ++*(int *)userdata;
    return tooloop_model_response_set_json(
               response, "{\"content\": [{\"type\": \"text\", \"text\": \"ok\"}], \"stop_reason\": \"end_turn\"}") ==
                   TOOLOOP_OK
               ? 0
               : 1;
}

static char *messages_of(const tooloop_agent *agent) {
    char *m = NULL;
    CHECK_STATUS(tooloop_agent_messages_json(agent, &m), TOOLOOP_OK);
    return m;
}

int main(void) {
    tooloop_agent *a = NULL, *b = NULL, *c = NULL;
    char dir[] = "/tmp/tooloop-c-session-XXXXXX";
    char saved[256], appended[256], nested[256];
    char *result = NULL, *text = NULL, *ma = NULL, *mb = NULL, *history = NULL;
    int model_calls = 0;

    require_env("TOOLOOP_MOCK_URL");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(saved, sizeof saved, "%s/saved.jsonl", dir);
    snprintf(appended, sizeof appended, "%s/sub/appended.jsonl", dir);
    snprintf(nested, sizeof nested, "%s/saved.jsonl/x.jsonl", dir);

    /* 1. Fail mid-loop, then resume. */
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0}", &a), TOOLOOP_OK);
    if (a == NULL) return check_exit("session_resume");
    CHECK_STATUS(tooloop_agent_add_tool(a, "get_weather", "Weather.", "{\"properties\": {\"city\": {\"type\": \"string\"}}}",
                                        get_weather, NULL, NULL),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(a, "Weather in Oslo?", NULL, NULL, &result), TOOLOOP_OVERLOADED);
    CHECK_LAST_ERROR("tooloop_agent_run: API error: HTTP 529 overloaded_error: Overloaded (request-id req_mock_1)");
    CHECK(weather_calls == 1);
    ma = messages_of(a);
    /* Valid after the failure: the tool's result answers its call. */
    CHECK_CONTAINS(ma, "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_c_r1\",\"content\":\"4 C, rain\"}");
    tooloop_string_free(ma);

    CHECK_STATUS(tooloop_agent_resume(a, NULL, NULL, &result), TOOLOOP_OK);
    CHECK(weather_calls == 1); /* the tool that already ran did not run again */
    CHECK_STATUS(tooloop_json_get(result, "/text", &text), TOOLOOP_OK);
    CHECK(text != NULL && strcmp(text, "Oslo: 4 \xc2\xb0" "C and raining.") == 0);
    tooloop_string_free(text);
    tooloop_string_free(result);
    CHECK_STATUS(tooloop_agent_history_json(a, &history), TOOLOOP_OK);
    CHECK_CONTAINS(history, "\"status\":\"error\""); /* the failed turn is kept in the history */
    tooloop_string_free(history);

    /* 2. Save the whole conversation; load it into another agent: the same API view. */
    CHECK_STATUS(tooloop_agent_save_session(a, saved), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_save_session(a, saved), TOOLOOP_OK); /* replaces the file */
    CHECK_STATUS(tooloop_agent_new_with_model("{}", ok_model, &model_calls, NULL, &b), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_open_session(b, saved), TOOLOOP_OK);
    ma = messages_of(a);
    mb = messages_of(b);
    CHECK(ma != NULL && mb != NULL && strcmp(ma, mb) == 0);
    tooloop_string_free(ma);
    tooloop_string_free(mb);
    /* A session goes on an empty conversation only. */
    CHECK_STATUS(tooloop_agent_open_session(b, saved), TOOLOOP_CONFIG);
    CHECK_LAST_ERROR("before the conversation has entries");
    tooloop_agent_free(b);
    b = NULL;

    /* 3. The "session" config key appends as the conversation goes; a new agent on the file sees it all. */
    {
        char config[512];
        snprintf(config, sizeof config, "{\"session\": \"%s\"}", appended);
        CHECK_STATUS(tooloop_agent_new_with_model(config, ok_model, &model_calls, NULL, &b), TOOLOOP_OK);
        CHECK_STATUS(tooloop_agent_run(b, "first", NULL, NULL, NULL), TOOLOOP_OK);
        CHECK_STATUS(tooloop_agent_save_session(b, appended), TOOLOOP_OK); /* its own file: nothing to do */
        tooloop_agent_free(b);
        CHECK_STATUS(tooloop_agent_new_with_model(config, ok_model, &model_calls, NULL, &c), TOOLOOP_OK);
        mb = messages_of(c);
        CHECK_CONTAINS(mb, "\"text\":\"first\"");
        CHECK_CONTAINS(mb, "\"text\":\"ok\"");
        tooloop_string_free(mb);
        /* Reset is recorded in the file: loading it again gives an empty conversation. */
        CHECK_STATUS(tooloop_agent_reset(c), TOOLOOP_OK);
        mb = messages_of(c);
        CHECK(mb != NULL && strcmp(mb, "[]") == 0);
        tooloop_string_free(mb);
        tooloop_agent_free(c);
        CHECK_STATUS(tooloop_agent_new_with_model(config, ok_model, &model_calls, NULL, &c), TOOLOOP_OK);
        mb = messages_of(c);
        CHECK(mb != NULL && strcmp(mb, "[]") == 0);
        tooloop_string_free(mb);
        /* Resume on an empty conversation: nothing to resume. */
        CHECK_STATUS(tooloop_agent_resume(c, NULL, NULL, NULL), TOOLOOP_CONFIG);
        CHECK_LAST_ERROR("nothing to resume");
        tooloop_agent_free(c);
        CHECK(model_calls == 1);
    }

    /* 4. Paths that cannot be a session file: TOOLOOP_IO with the OS reason. */
    CHECK_STATUS(tooloop_agent_save_session(a, nested), TOOLOOP_IO);
    CHECK_LAST_ERROR("saved.jsonl");
    CHECK_STATUS(tooloop_agent_new_with_model("{}", ok_model, &model_calls, NULL, &b), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_open_session(b, dir), TOOLOOP_IO); /* a folder */
    CHECK_LAST_ERROR(dir);
    tooloop_agent_free(b);
    tooloop_agent_free(a);

    /* Clean up: the files written must be exactly these. */
    CHECK(unlink(saved) == 0);
    CHECK(unlink(appended) == 0);
    snprintf(appended, sizeof appended, "%s/sub", dir);
    CHECK(rmdir(appended) == 0);
    CHECK(rmdir(dir) == 0); /* fails if a temporary file was left behind */
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("session_resume");
}
