/* Bad input never crashes (tests/scenarios/c_bad_input.json): NULL for every pointer argument, invalid
 * UTF-8 for every string, bad configs, bad schemas, duplicate names, a tool that sets no result, a tool
 * that returns non-zero, re-entrant calls from a callback, an API error, and a panic inside the library:
 * each gives its documented status and a readable tooloop_last_error(); outputs stay untouched on failure;
 * every userdata_free runs exactly once. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include "check.h"

/* Test-only: built with the cargo feature `test-panic` (tests/c/Makefile), not in the public header. */
tooloop_status tooloop_debug_panic(void);
#include "workers.h"

static const char BAD_UTF8[] = {'a', (char)0xC3, (char)0x28, 'b', 0}; /* 0xC3 0x28: an invalid sequence */
static const char *SCHEMA = "{\"type\": \"object\"}";

static int frees;
static void count_free(void *userdata) {
    (void)userdata;
    frees++;
}

static int32_t noop_tool(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)userdata;
    (void)input_json;
    tooloop_tool_result_set_text(result, "ok");
    return 0;
}

static tooloop_agent *the_agent;
static int weather_calls, silent_calls, abort_calls;

static int32_t get_weather(void *userdata, const char *input_json, tooloop_tool_result *result) {
    char *out = (char *)"untouched";
    (void)userdata;
    (void)input_json;
    weather_calls++;
    CHECK(!tooloop_tool_result_is_cancelled(NULL));
    CHECK_STATUS(tooloop_tool_result_set_text(NULL, "x"), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_tool_result_set_text: result is NULL");
    CHECK_STATUS(tooloop_tool_result_set_error(NULL, "x"), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_tool_result_set_text(result, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("text is NULL");
    CHECK_STATUS(tooloop_tool_result_set_error(result, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("message is NULL");
    CHECK_STATUS(tooloop_tool_result_set_text(result, BAD_UTF8), TOOLOOP_INVALID_UTF8);
    CHECK_LAST_ERROR("text is not valid UTF-8 (the first invalid byte is at offset 1)");
    CHECK_STATUS(tooloop_tool_result_set_error(result, BAD_UTF8), TOOLOOP_INVALID_UTF8);
    /* Re-entrant calls on the running agent: BUSY for the ones that would change it, readers allowed. */
    CHECK_STATUS(tooloop_agent_run(the_agent, "again", NULL, NULL, NULL), TOOLOOP_BUSY);
    CHECK_LAST_ERROR("a run is in progress on this agent");
    CHECK_STATUS(tooloop_agent_resume(the_agent, NULL, NULL, NULL), TOOLOOP_BUSY);
    CHECK_STATUS(tooloop_agent_reset(the_agent), TOOLOOP_BUSY);
    CHECK_STATUS(tooloop_agent_open_session(the_agent, "/tmp/never.jsonl"), TOOLOOP_BUSY);
    CHECK_STATUS(tooloop_agent_save_session(the_agent, "/tmp/never.jsonl"), TOOLOOP_BUSY);
    CHECK_STATUS(tooloop_agent_messages_json(the_agent, &out), TOOLOOP_OK);
    CHECK_CONTAINS(out, "toolu_c_b1");
    tooloop_string_free(out);
    /* After all those failures, a good set still answers the call. */
    CHECK_STATUS(tooloop_tool_result_set_text(result, "sunny"), TOOLOOP_OK);
    return 0;
}

static int32_t silent(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)userdata;
    (void)input_json;
    (void)result;
    silent_calls++;
    return 0; /* no result set */
}

static int32_t abort_me(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)userdata;
    CHECK_CONTAINS(input_json, "\"why\":\"test\"");
    abort_calls++;
    tooloop_tool_result_set_error(result, "disk full");
    return 7;
}

static char results_log[2048];
static void log_results(void *userdata, const tooloop_event *ev) {
    (void)userdata;
    if (ev->type == TOOLOOP_EVENT_TOOL_RESULT) {
        strncat(results_log, ev->json, sizeof results_log - strlen(results_log) - 2);
        strcat(results_log, "\n");
    }
}

static void null_arguments(tooloop_agent *agent) {
    char *out = (char *)"untouched";
    tooloop_agent *created = (tooloop_agent *)&out; /* a sentinel that must survive failures */
    int before = frees;

    CHECK_STATUS(tooloop_agent_new(NULL, &created), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_new: config_json is NULL");
    CHECK(created == (tooloop_agent *)&out);
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"m\"}", NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("out is NULL");
    CHECK_STATUS(tooloop_agent_new_with_model(NULL, NULL, NULL, count_free, &created),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK(frees == before + 1);

    CHECK_STATUS(tooloop_agent_add_tool(NULL, "t", "d", SCHEMA, noop_tool, NULL, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_add_tool: agent is NULL");
    CHECK_STATUS(tooloop_agent_add_tool(agent, NULL, "d", SCHEMA, noop_tool, NULL, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("name is NULL");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "t", "d", NULL, noop_tool, NULL, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("schema_json is NULL");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "t", "d", SCHEMA, NULL, NULL, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("fn is NULL");
    CHECK(frees == before + 5); /* userdata_free ran once per failed registration */

    CHECK_STATUS(tooloop_agent_run(NULL, "hi", NULL, NULL, &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_run: agent is NULL");
    CHECK_STATUS(tooloop_agent_run(agent, NULL, NULL, NULL, &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("input is NULL");
    CHECK_STATUS(tooloop_agent_resume(NULL, NULL, NULL, &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_cancel(NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_cancel: agent is NULL");
    CHECK_STATUS(tooloop_agent_messages_json(NULL, &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_messages_json(agent, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_history_json(NULL, &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_history_json(agent, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_usage_json(NULL, &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_usage_json(agent, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_usage_json: out is NULL");
    CHECK_STATUS(tooloop_agent_open_session(NULL, "/tmp/x.jsonl"), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_open_session(agent, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("path is NULL");
    CHECK_STATUS(tooloop_agent_save_session(NULL, "/tmp/x.jsonl"), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_save_session(agent, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_reset(NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_model_response_set_json(NULL, "{}"), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("response is NULL");
    CHECK(!tooloop_model_response_is_cancelled(NULL));
    CHECK(!tooloop_tool_result_is_cancelled(NULL));
    CHECK_STATUS(tooloop_json_get(NULL, "", &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_json_get("{}", NULL, &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_json_get("{}", "", NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK(strcmp(out, "untouched") == 0);

    /* The _free functions take NULL as a no-op. */
    tooloop_agent_free(NULL);
    tooloop_string_free(NULL);
    /* A NULL description is allowed: no description. */
    CHECK_STATUS(tooloop_agent_add_tool(agent, "no_description", NULL, SCHEMA, noop_tool, NULL, count_free), TOOLOOP_OK);
    CHECK(*tooloop_last_error() == '\0'); /* a success clears the last error */
}

static void invalid_utf8(tooloop_agent *agent) {
    char *out = (char *)"untouched";
    tooloop_agent *created = NULL;
    int before = frees;
    char config[64];

    CHECK_STATUS(tooloop_agent_new(BAD_UTF8, &created), TOOLOOP_INVALID_UTF8);
    CHECK_LAST_ERROR("config_json is not valid UTF-8");
    snprintf(config, sizeof config, "{\"model\": \"%s\"}", BAD_UTF8);
    CHECK_STATUS(tooloop_agent_new(config, &created), TOOLOOP_INVALID_UTF8);
    CHECK(created == NULL);
    CHECK_STATUS(tooloop_agent_add_tool(agent, BAD_UTF8, "d", SCHEMA, noop_tool, NULL, count_free), TOOLOOP_INVALID_UTF8);
    CHECK_LAST_ERROR("name is not valid UTF-8");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "t", BAD_UTF8, SCHEMA, noop_tool, NULL, count_free), TOOLOOP_INVALID_UTF8);
    CHECK_LAST_ERROR("description is not valid UTF-8");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "t", "d", BAD_UTF8, noop_tool, NULL, count_free), TOOLOOP_INVALID_UTF8);
    CHECK_LAST_ERROR("schema_json is not valid UTF-8");
    CHECK(frees == before + 3);
    CHECK_STATUS(tooloop_agent_run(agent, BAD_UTF8, NULL, NULL, &out), TOOLOOP_INVALID_UTF8);
    CHECK_LAST_ERROR("input is not valid UTF-8");
    CHECK_STATUS(tooloop_agent_open_session(agent, BAD_UTF8), TOOLOOP_INVALID_UTF8);
    CHECK_STATUS(tooloop_agent_save_session(agent, BAD_UTF8), TOOLOOP_INVALID_UTF8);
    CHECK_STATUS(tooloop_json_get(BAD_UTF8, "", &out), TOOLOOP_INVALID_UTF8);
    CHECK_STATUS(tooloop_json_get("{}", BAD_UTF8, &out), TOOLOOP_INVALID_UTF8);
    CHECK(strcmp(out, "untouched") == 0);
}

static void bad_configs(void) {
    struct {
        const char *config;
        tooloop_status want;
        const char *detail;
    } cases[] = {
        {"{\"model\": ", TOOLOOP_INVALID_JSON, "config_json is not valid JSON"},
        {"", TOOLOOP_INVALID_JSON, "config_json is not valid JSON"},
        {"[\"model\"]", TOOLOOP_INVALID_ARGUMENT, "config_json must be a JSON object"},
        {"{\"model\": \"m\", \"max_token\": 10}", TOOLOOP_INVALID_ARGUMENT, "config key \"max_token\": unknown option"},
        {"{\"model\": \"m\", \"max_tokens\": \"10\"}", TOOLOOP_INVALID_ARGUMENT, "\"max_tokens\": must be a positive integer"},
        {"{\"model\": \"m\", \"max_tokens\": 0}", TOOLOOP_INVALID_ARGUMENT, "\"max_tokens\": must be a positive integer"},
        {"{\"model\": \"m\", \"max_tokens\": -1}", TOOLOOP_INVALID_ARGUMENT, "\"max_tokens\": must be a positive integer"},
        {"{\"model\": \"m\", \"base_url\": \"localhost:8080\"}", TOOLOOP_INVALID_ARGUMENT, "\"base_url\": must start with http://"},
        {"{\"model\": \"m\", \"headers\": {\"x-a\": \"v\\r\\nInjected: 1\"}}", TOOLOOP_INVALID_ARGUMENT, "without line breaks"},
        {"{\"model\": \"m\", \"headers\": {\"bad name\": \"v\"}}", TOOLOOP_INVALID_ARGUMENT, "not a valid header name"},
        {"{\"model\": \"m\", \"temperature\": 9}", TOOLOOP_INVALID_ARGUMENT, "\"temperature\": must be a number from 0 to 2"},
        {"{\"model\": \"m\", \"max_turns\": -1}", TOOLOOP_INVALID_ARGUMENT, "\"max_turns\""},
        {"{\"model\": \"m\", \"timeout\": 0}", TOOLOOP_INVALID_ARGUMENT, "\"timeout\": must be a positive number"},
        {"{\"model\": \"m\", \"stream\": \"yes\"}", TOOLOOP_INVALID_ARGUMENT, "\"stream\": must be true or false"},
        {"{\"model\": \"m\", \"thinking\": \"lots\"}", TOOLOOP_INVALID_ARGUMENT, "\"thinking\""},
        {"{\"model\": \"m\", \"system\": 5}", TOOLOOP_INVALID_ARGUMENT, "\"system\""},
        {"{\"model\": \"m\", \"api_key\": 12345}", TOOLOOP_INVALID_ARGUMENT, "\"api_key\": must be a string (value hidden)"},
        {"{\"model\": \"m\", \"builtin_tools\": \"all\"}", TOOLOOP_INVALID_ARGUMENT, "\"builtin_tools\""},
        {"{\"model\": \"m\", \"provider\": \"gemini\"}", TOOLOOP_INVALID_ARGUMENT, "\"provider\": must be \"anthropic\", \"openai\", \"openai-responses\", \"bedrock\" or \"host\""},
        {"{\"model\": \"m\", \"provider\": \"host\"}", TOOLOOP_INVALID_ARGUMENT, "needs a model callback: create the agent with tooloop_agent_new_with_model"},
        {"{\"system\": \"no model\"}", TOOLOOP_INVALID_ARGUMENT, "\"model\" is required"},
        {"{\"model\": \"m\", \"builtin_tools\": [\"rm_rf\"]}", TOOLOOP_CONFIG, "unknown built-in tool 'rm_rf'"},
        {"{\"model\": \"m\", \"builtin_tools\": true, \"workspace\": \"/nonexistent/tooloop\"}", TOOLOOP_CONFIG, "/nonexistent/tooloop"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tooloop_agent *agent = NULL;
        tooloop_status got = tooloop_agent_new(cases[i].config, &agent);
        if (got != cases[i].want || strstr(tooloop_last_error(), cases[i].detail) == NULL) {
            fprintf(stderr, "config %s: got %d (%s) \"%s\", expected %d with \"%s\"\n", cases[i].config, (int)got,
                    tooloop_status_str(got), tooloop_last_error(), (int)cases[i].want, cases[i].detail);
            check_failures++;
        }
        CHECK(agent == NULL);
        tooloop_agent_free(agent);
    }
}

static void missing_api_key(void) {
    /* Without a key and with the official endpoint, creating the agent names the variable to set. */
    tooloop_agent *agent = NULL;
    char *key = strdup(require_env("ANTHROPIC_API_KEY"));
    char *url = strdup(require_env("ANTHROPIC_BASE_URL"));
    unsetenv("ANTHROPIC_API_KEY");
    unsetenv("ANTHROPIC_BASE_URL");
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"m\"}", &agent), TOOLOOP_CONFIG);
    CHECK_LAST_ERROR("no API key: set ANTHROPIC_API_KEY");
    CHECK(agent == NULL);
    setenv("ANTHROPIC_API_KEY", key, 1);
    setenv("ANTHROPIC_BASE_URL", url, 1);
    free(key);
    free(url);
}

static void bad_tools(tooloop_agent *agent) {
    int before = frees;
    CHECK_STATUS(tooloop_agent_add_tool(agent, "t", "d", "[1, 2]", noop_tool, NULL, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tool 't': input_schema must be a JSON object");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "t", "d", "\"object\"", noop_tool, NULL, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "t", "d", "{\"type\": \"array\"}", noop_tool, NULL, count_free),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("must have \"type\": \"object\"");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "t", "d", "{\"type\": ", noop_tool, NULL, count_free), TOOLOOP_INVALID_JSON);
    CHECK_LAST_ERROR("schema_json of tool 't' is not valid JSON");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "has space", "d", SCHEMA, noop_tool, NULL, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("invalid tool name \"has space\"");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "", "d", SCHEMA, noop_tool, NULL, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "get_weather", "again", SCHEMA, noop_tool, NULL, count_free),
                 TOOLOOP_DUPLICATE_TOOL);
    CHECK_LAST_ERROR("a tool named 'get_weather' is already registered");
    CHECK(frees == before + 7);
}

int main(void) {
    tooloop_agent *agent = NULL, *with_builtins = NULL;
    char *result = (char *)"untouched", *messages = NULL;
    int weather_free = 0;

    require_env("TOOLOOP_MOCK_URL");
    missing_api_key();
    bad_configs();

    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0}", &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("bad_input");
    the_agent = agent;
    CHECK_STATUS(tooloop_agent_add_tool(agent, "get_weather", "Weather.", SCHEMA, get_weather, &weather_free, count_free),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "silent", "Says nothing.", SCHEMA, silent, NULL, NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "abort_me", "Aborts.", SCHEMA, abort_me, NULL, NULL), TOOLOOP_OK);
    null_arguments(agent);
    invalid_utf8(agent);
    bad_tools(agent);

    /* Built-in tool names are taken too. */
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"m\", \"builtin_tools\": [\"read_file\"], \"workspace\": \"/tmp\"}",
                                   &with_builtins),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(with_builtins, "read_file", "mine", SCHEMA, noop_tool, NULL, count_free),
                 TOOLOOP_DUPLICATE_TOOL);
    tooloop_agent_free(with_builtins);

    /* Responses 0-1: the silent tool's call gets "the tool returned no result" as an error; the run goes on. */
    CHECK_STATUS(tooloop_agent_run(agent, "Weather in Rome?", log_results, NULL, &result), TOOLOOP_OK);
    /* The failed calls get_weather made inside the run do not linger: the run succeeded. */
    CHECK(*tooloop_last_error() == '\0');
    CHECK(weather_calls == 1 && silent_calls == 1);
    CHECK_CONTAINS(results_log, "\"name\":\"get_weather\",\"content\":\"sunny\",\"is_error\":false");
    CHECK_CONTAINS(results_log, "\"name\":\"silent\",\"content\":\"the tool returned no result\",\"is_error\":true");
    CHECK_CONTAINS(result, "The silent tool said nothing.");
    tooloop_string_free(result);

    /* Response 2: a tool returning non-zero aborts the run with TOOLOOP_TOOL_ABORTED naming the tool. */
    result = (char *)"untouched";
    CHECK_STATUS(tooloop_agent_run(agent, "Abort, please.", NULL, NULL, &result), TOOLOOP_TOOL_ABORTED);
    CHECK_LAST_ERROR("tool 'abort_me' aborted the run: the tool callback returned 7: disk full");
    CHECK(strcmp(result, "untouched") == 0);
    CHECK(abort_calls == 1);
    CHECK_STATUS(tooloop_agent_messages_json(agent, &messages), TOOLOOP_OK);
    CHECK_CONTAINS(messages, "\"tool_use_id\":\"toolu_c_b3\""); /* answered: the view stays valid */
    tooloop_string_free(messages);

    /* Response 3: 401 -> TOOLOOP_AUTHENTICATION with the HTTP status, error type, message and request id. */
    CHECK_STATUS(tooloop_agent_run(agent, "Hello?", NULL, NULL, NULL), TOOLOOP_AUTHENTICATION);
    CHECK_LAST_ERROR("HTTP 401 authentication_error: invalid x-api-key (request-id req_mock_3)");
    CHECK_NOT_CONTAINS(tooloop_last_error(), "sk-ant-mock");

    /* A panic inside the library is caught at the boundary: TOOLOOP_PANIC, a readable message, and the
     * library (and this agent) keep working. */
    CHECK_STATUS(tooloop_debug_panic(), TOOLOOP_PANIC);
    CHECK_LAST_ERROR("tooloop_debug_panic: internal panic in libtooloop: tooloop_debug_panic was called");
    CHECK_STATUS(tooloop_agent_messages_json(agent, &messages), TOOLOOP_OK);
    tooloop_string_free(messages);

    CHECK(weather_free == 0);
    frees = 0;
    tooloop_agent_free(agent);
    CHECK(frees == 2); /* get_weather's and no_description's userdata, once each */
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("bad_input");
}
