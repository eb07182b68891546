/* OpenAI's Responses API through the C API (tests/scenarios/responses_reasoning_tool.json), streamed:
 * "provider": "openai-responses" with "thinking" maps onto the core, the base URL comes from OPENAI_BASE_URL,
 * the reasoning summary arrives as thinking events, a C tool answers the function_call, and the next request
 * carries the reasoning item (its encrypted_content) and the function_call_output by call_id — checked in
 * `--requests FILE` mode on what the mock server recorded. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include "check.h"
#include "workers.h"

typedef struct {
    char thinking[256];
    char text[256];
} event_log;

static void on_event(void *userdata, const tooloop_event *ev) {
    event_log *log = (event_log *)userdata;
    char *into = ev->type == TOOLOOP_EVENT_THINKING ? log->thinking : ev->type == TOOLOOP_EVENT_TEXT ? log->text : NULL;
    if (into != NULL && ev->text != NULL) strncat(into, ev->text, 255 - strlen(into));
}

static int32_t get_weather(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)userdata;
    CHECK_CONTAINS(input_json, "\"city\":\"Paris\"");
    CHECK_STATUS(tooloop_tool_result_set_text(result, "18 \xc2\xb0" "C"), TOOLOOP_OK);
    return 0;
}

static int run_agent(void) {
    tooloop_agent *agent = NULL;
    char *result = NULL, *text = NULL, *usage = NULL;
    event_log log;
    memset(&log, 0, sizeof log);
    require_env("OPENAI_BASE_URL");
    {
        /* The provider table names the wire and where its key and URL come from. */
        char *providers = NULL, *name = NULL, *key_var = NULL;
        CHECK_STATUS(tooloop_providers_json(&providers), TOOLOOP_OK);
        CHECK_STATUS(tooloop_json_get(providers, "/2/name", &name), TOOLOOP_OK);
        CHECK(name != NULL && strcmp(name, "openai-responses") == 0);
        CHECK_STATUS(tooloop_json_get(providers, "/2/key_var", &key_var), TOOLOOP_OK);
        CHECK(key_var != NULL && strcmp(key_var, "OPENAI_API_KEY") == 0);
        CHECK_STATUS(tooloop_providers_json(NULL), TOOLOOP_INVALID_ARGUMENT);
        tooloop_string_free(name);
        tooloop_string_free(key_var);
        tooloop_string_free(providers);
    }
    CHECK_STATUS(tooloop_agent_new("{\"provider\": \"openai-responses\", \"model\": \"gpt-5\", \"thinking\": 2048,"
                                   " \"max_retries\": 0, \"timeout\": 30}",
                                   &agent),
                 TOOLOOP_OK);
    if (agent == NULL) return check_exit("responses_provider");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "get_weather", "Current weather in a city.",
                                        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}",
                                        get_weather, NULL, NULL),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "Weather in Paris?", on_event, &log, &result), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(result, "/text", &text), TOOLOOP_OK);
    CHECK(text != NULL && strcmp(text, "It is 18 \xc2\xb0" "C in Paris.") == 0);
    CHECK(strcmp(log.text, "It is 18 \xc2\xb0" "C in Paris.") == 0);
    CHECK(strcmp(log.thinking, "Checking the weather first.\n\nParis is the city asked about.") == 0);
    CHECK_STATUS(tooloop_agent_usage_json(agent, &usage), TOOLOOP_OK);
    CHECK_CONTAINS(usage, "\"output_tokens\":170");
    tooloop_string_free(text);
    tooloop_string_free(result);
    tooloop_string_free(usage);
    tooloop_agent_free(agent);
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("responses_provider");
}

/* ---- --requests FILE: the requests the mock server recorded (mockctl --requests-out). ---- */

static int check_requests(const char *path) {
    char *all = check_read_file(path), *second = NULL, *first_path = NULL;
    if (all == NULL) {
        fprintf(stderr, "responses_provider: cannot read %s\n", path);
        return 1;
    }
    CHECK_STATUS(tooloop_json_get(all, "/0/path", &first_path), TOOLOOP_OK);
    CHECK(first_path != NULL && strcmp(first_path, "/v1/responses") == 0);
    CHECK_STATUS(tooloop_json_get(all, "/1/raw_body", &second), TOOLOOP_OK);
    if (second != NULL) {
        CHECK_CONTAINS(second, "\"store\":false");
        CHECK_CONTAINS(second, "\"encrypted_content\":\"gAAAAB-enc-one==\"");
        CHECK_CONTAINS(second, "\"type\":\"function_call_output\",\"call_id\":\"call_1\"");
        CHECK_CONTAINS(second, "\"reasoning\":{\"effort\":\"low\",\"summary\":\"auto\"}");
    }
    tooloop_string_free(first_path);
    tooloop_string_free(second);
    free(all);
    return check_exit("responses_provider --requests");
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--requests") == 0) return check_requests(argv[2]);
    return run_agent();
}
