/* The OpenAI-compatible provider through the C API (tests/scenarios/openai_text.json), non-streaming:
 * "provider": "openai" and "stream": false map onto the core, the base URL comes from OPENAI_BASE_URL, and
 * the answer and usage come back in the neutral (Messages API) shape. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include "check.h"
#include "workers.h"

int main(void) {
    tooloop_agent *agent = NULL;
    char *result = NULL, *text = NULL, *usage = NULL;

    require_env("OPENAI_BASE_URL");
    CHECK_STATUS(tooloop_agent_new("{\"provider\": \"openai\", \"model\": \"gpt-4o-mini\", \"stream\": false,"
                                   " \"max_retries\": 0, \"timeout\": 30}",
                                   &agent),
                 TOOLOOP_OK);
    if (agent == NULL) return check_exit("openai_provider");
    CHECK_STATUS(tooloop_agent_run(agent, "Say hello.", NULL, NULL, &result), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(result, "/text", &text), TOOLOOP_OK);
    CHECK(text != NULL && strcmp(text, "Hello! How can I help you today? \xe2\x80\x94 Bonjour ! \xf0\x9f\x99\x82") == 0);
    CHECK_CONTAINS(result, "\"stop_reason\":\"end_turn\"");
    CHECK_STATUS(tooloop_agent_usage_json(agent, &usage), TOOLOOP_OK);
    CHECK_CONTAINS(usage, "\"input_tokens\":19");
    CHECK_CONTAINS(usage, "\"output_tokens\":14");
    tooloop_string_free(text);
    tooloop_string_free(result);
    tooloop_string_free(usage);
    tooloop_agent_free(agent);
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("openai_provider");
}
