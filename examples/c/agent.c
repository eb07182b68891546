/* A minimal tooloop agent in C: one tool (get_time), streamed output.
 *
 * Build (from the repository root, one line):
 *   cargo build -p tooloop-capi --release && mkdir -p examples/c/build && cc -std=c99 -Wall -Wextra -Iinclude examples/c/agent.c -Ltarget/release -ltooloop -Wl,-rpath,"$PWD/target/release" -o examples/c/build/agent
 * or, with pkg-config (after `make -C bindings/c`):
 *   cc -std=c99 examples/c/agent.c $(PKG_CONFIG_PATH=target/release/pkgconfig pkg-config --cflags --libs tooloop) -o examples/c/build/agent
 *
 * Run:
 *   ANTHROPIC_API_KEY=sk-ant-... examples/c/build/agent "What time is it?"
 * or without a network, against the mock server:
 *   python3 tests/mock/mockctl.py run tests/scenarios/c_example_time.json -- examples/c/build/agent
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tooloop.h"

/* The tool: the model sends {} (or {"utc": true}); we answer with the local (or UTC) time. */
static int32_t get_time(void *userdata, const char *input_json, tooloop_tool_result *result) {
    char *utc = NULL, text[64];
    time_t now = time(NULL);
    struct tm *t;
    (void)userdata;
    if (tooloop_json_get(input_json, "/utc", &utc) == TOOLOOP_OK && strcmp(utc, "true") == 0) {
        t = gmtime(&now);
    } else {
        t = localtime(&now);
    }
    tooloop_string_free(utc);
    if (t == NULL || strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", t) == 0) {
        tooloop_tool_result_set_error(result, "the clock is unavailable");
        return 0;
    }
    tooloop_tool_result_set_text(result, text);
    return 0; /* non-zero would abort the run */
}

/* Events: print the answer as it streams, and each tool call. */
static void on_event(void *userdata, const tooloop_event *event) {
    (void)userdata;
    if (event->type == TOOLOOP_EVENT_TEXT) {
        fputs(event->text, stdout);
        fflush(stdout);
    } else if (event->type == TOOLOOP_EVENT_TURN_END) {
        fputs("\n", stdout);
    } else if (event->type == TOOLOOP_EVENT_TOOL_USE) {
        fprintf(stderr, "[tool] %s\n", event->json);
    }
}

static int fail(const char *what, tooloop_status status) {
    fprintf(stderr, "%s failed: %s: %s\n", what, tooloop_status_str(status), tooloop_last_error());
    return 1;
}

int main(int argc, char **argv) {
    const char *prompt = argc > 1 ? argv[1] : "What time is it?";
    tooloop_agent *agent = NULL;
    char *usage = NULL;
    tooloop_status status;

    /* The API key and base URL come from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL. */
    status = tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"system\": \"You are brief.\", \"max_turns\": 5}",
                               &agent);
    if (status != TOOLOOP_OK) return fail("tooloop_agent_new", status);

    status = tooloop_agent_add_tool(agent, "get_time", "Get the current date and time.",
                                    "{\"type\": \"object\", \"properties\": {\"utc\": {\"type\": \"boolean\","
                                    " \"description\": \"UTC instead of local time\"}}}",
                                    get_time, NULL, NULL);
    if (status != TOOLOOP_OK) {
        tooloop_agent_free(agent);
        return fail("tooloop_agent_add_tool", status);
    }

    status = tooloop_agent_run(agent, prompt, on_event, NULL, NULL);
    if (status != TOOLOOP_OK) {
        int rc = fail("tooloop_agent_run", status);
        tooloop_agent_free(agent);
        return rc;
    }
    if (tooloop_agent_usage_json(agent, &usage) == TOOLOOP_OK) {
        fprintf(stderr, "[usage] %s\n", usage);
        tooloop_string_free(usage);
    }
    tooloop_agent_free(agent);
    return 0;
}
