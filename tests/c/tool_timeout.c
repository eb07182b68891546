/* A C tool that overruns its time limit (tooloop_agent_set_tool_timeout): the run does not wait for it, the
 * model reads an error result saying so, the callback sees tooloop_tool_result_is_cancelled and stops, and
 * its userdata_free still runs exactly once. Host model, no server. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include "check.h"

#include <time.h>

typedef struct {
    int calls;
} model_state;

static int32_t model(void *userdata, const char *request_json, tooloop_model_response *response) {
    model_state *st = (model_state *)userdata;
    st->calls++;
    if (st->calls == 1) {
        return tooloop_model_response_set_json(
                   response, "{\"content\": [{\"type\": \"tool_use\", \"id\": \"toolu_slow\", \"name\": \"slow\","
                             " \"input\": {}}], \"stop_reason\": \"tool_use\"}") == TOOLOOP_OK
                   ? 0
                   : 1;
    }
    /* The second request carries the error result of the overrun. */
    CHECK_CONTAINS(request_json, "\"tool_use_id\":\"toolu_slow\"");
    CHECK_CONTAINS(request_json, "did not finish within its time limit of 0.3 s");
    CHECK_CONTAINS(request_json, "\"is_error\":true");
    return tooloop_model_response_set_json(response, "{\"content\": \"gave up\"}") == TOOLOOP_OK ? 0 : 1;
}

typedef struct {
    volatile int told_to_stop;
    volatile int returned;
    volatile int freed;
} slow_state;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Works for up to 10 s unless told to stop. */
static int32_t slow(void *userdata, const char *input_json, tooloop_tool_result *result) {
    slow_state *st = (slow_state *)userdata;
    double start = now();
    (void)input_json;
    while (now() - start < 10.0) {
        if (tooloop_tool_result_is_cancelled(result)) {
            st->told_to_stop = 1;
            break;
        }
        nap(10);
    }
    tooloop_tool_result_set_text(result, "finished late");
    st->returned = 1;
    return 0;
}

static void slow_free(void *userdata) { ((slow_state *)userdata)->freed++; }

int main(void) {
    model_state st = {0};
    static slow_state tool;
    tooloop_agent *agent = NULL;
    char *result = NULL;
    double start, waited;
    int i;

    CHECK_STATUS(tooloop_agent_new_with_model("{}", model, &st, NULL, &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("tool_timeout");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "slow", "Takes long.", "{\"type\": \"object\"}", slow, &tool, slow_free),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_tool_timeout(agent, "slow", 0.0), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_set_tool_timeout(agent, "nope", 1.0), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("no tool named 'nope'");
    CHECK_STATUS(tooloop_agent_set_tool_timeout(agent, "slow", 0.3), TOOLOOP_OK);

    start = now();
    CHECK_STATUS(tooloop_agent_run(agent, "go", NULL, NULL, &result), TOOLOOP_OK);
    waited = now() - start;
    /* Well under the tool's 10 s: the run did not wait for it (valgrind on a loaded machine is slow). */
    CHECK(waited < 8.0);
    CHECK_CONTAINS(result, "gave up");
    tooloop_string_free(result);

    /* The callback was told to stop and returns soon after. */
    for (i = 0; i < 300 && !tool.returned; i++) nap(10);
    CHECK(tool.told_to_stop);
    CHECK(tool.returned);
    tooloop_agent_free(agent);
    for (i = 0; i < 300 && tool.freed == 0; i++) nap(10);
    CHECK(tool.freed == 1);
    return check_exit("tool_timeout");
}
