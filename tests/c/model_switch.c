/* One conversation, any provider, through the C API (tests/scenarios/c_model_switch.json): a run on Anthropic
 * (thinking and a tool call), tooloop_agent_set_model onto OpenAI (its key and URL from the environment as it
 * was when the agent was created), a run there (a call id Anthropic would refuse), back to Anthropic, whose
 * 529 makes the config's "fallback_models" answer (TOOLOOP_EVENT_MODEL_FALLBACK), the primary back after the
 * run. run.sh runs it with --requests-out, then as `model_switch --requests FILE` to check what each wire was
 * sent: no foreign signature, Anthropic's own signature back to it, the OpenAI call id mapped. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "workers.h"

static int fallbacks = 0;

static void on_event(void *userdata, const tooloop_event *event) {
    (void)userdata;
    if (event->type == TOOLOOP_EVENT_MODEL_FALLBACK) {
        fallbacks++;
        CHECK_CONTAINS(event->json, "\"to_model\":\"gpt-4o\"");
        CHECK_CONTAINS(event->json, "\"reason\":\"overloaded\"");
    }
}

static int32_t f(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)userdata;
    (void)input_json;
    return tooloop_tool_result_set_text(result, "f ran");
}

static int check_requests(const char *path) {
    char *all = check_read_file(path);
    char *openai = NULL, *back = NULL, *fallback = NULL, *none = NULL;
    CHECK(all != NULL);
    if (all == NULL) return check_exit("model_switch --requests");
    CHECK_STATUS(tooloop_json_get(all, "/2/raw_body", &openai), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(all, "/4/raw_body", &back), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(all, "/5/raw_body", &fallback), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(all, "/6", &none), TOOLOOP_NO_VALUE);
    /* OpenAI gets Anthropic's call and result in its own shape, never the signature. */
    CHECK_NOT_CONTAINS(openai, "SIG-C1");
    CHECK_CONTAINS(openai, "\"tool_call_id\":\"toolu_c1\"");
    /* Back on Anthropic: its own signature again; OpenAI's id mapped to ^[a-zA-Z0-9_-]+$ in call and result. */
    CHECK_CONTAINS(back, "SIG-C1");
    CHECK_NOT_CONTAINS(back, "\"call:0\"");
    CHECK_CONTAINS(back, "\"id\":\"call0_");
    CHECK_CONTAINS(back, "\"tool_use_id\":\"call0_");
    /* The fallback on OpenAI: no signature either. */
    CHECK_NOT_CONTAINS(fallback, "SIG-C1");
    CHECK_CONTAINS(fallback, "\"model\":\"gpt-4o\"");
    tooloop_string_free(openai);
    tooloop_string_free(back);
    tooloop_string_free(fallback);
    tooloop_string_free(none);
    free(all);
    return check_exit("model_switch --requests");
}

int main(int argc, char **argv) {
    tooloop_agent *agent = NULL;
    char *result = NULL, *history = NULL;

    if (argc == 3 && strcmp(argv[1], "--requests") == 0) return check_requests(argv[2]);
    require_env("ANTHROPIC_BASE_URL");
    require_env("OPENAI_BASE_URL");
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"cache\": false,"
                                   " \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 2048},"
                                   " \"fallback_models\": [{\"provider\": \"openai\", \"model\": \"gpt-4o\"}]}",
                                   &agent),
                 TOOLOOP_OK);
    if (agent == NULL) return check_exit("model_switch");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "f", "A tool.", "{\"type\": \"object\"}", f, NULL, NULL), TOOLOOP_OK);

    CHECK_STATUS(tooloop_agent_run(agent, "first", on_event, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"text\":\"one\"");
    tooloop_string_free(result);
    result = NULL;

    /* Bad arguments change nothing. */
    CHECK_STATUS(tooloop_agent_set_model(agent, "gpt-4o", "nope", NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_set_model(agent, "gpt-4o", "openai", "{\"colour\": 1}"), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("colour");
    CHECK_STATUS(tooloop_agent_set_model(agent, "gpt-4o", "openai", "[1"), TOOLOOP_INVALID_JSON);
    CHECK_STATUS(tooloop_agent_set_model(agent, NULL, NULL, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_set_model(NULL, "gpt-4o", NULL, NULL), TOOLOOP_INVALID_ARGUMENT);

    CHECK_STATUS(tooloop_agent_set_model(agent, "gpt-4o", "openai", NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "second", on_event, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"text\":\"two\"");
    tooloop_string_free(result);
    result = NULL;

    CHECK_STATUS(tooloop_agent_set_model(agent, "claude-sonnet-4-6", "anthropic", "{\"headers\": {}}"), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "third", on_event, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"text\":\"three from the fallback\"");
    CHECK(fallbacks == 1);

    CHECK_STATUS(tooloop_agent_history_json(agent, &history), TOOLOOP_OK);
    CHECK_CONTAINS(history, "\"provider\":\"openai\"");
    CHECK_CONTAINS(history, "\"model_switch\"");
    CHECK_CONTAINS(history, "\"model_fallback\"");

    tooloop_string_free(result);
    tooloop_string_free(history);
    tooloop_agent_free(agent);
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("model_switch");
}
