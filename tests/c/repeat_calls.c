/* A C tool called four times with the same input in one turn (roll_dice({}), tests/scenarios/c_roll_dice.json):
 * by default every call runs (the repetition guards are the coding agent's policy, off in the library); with
 * "progress_guard" on the third and fourth are refused; marked not idempotent (tooloop_agent_set_tool_idempotent)
 * every call runs again, guard on. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include "check.h"

typedef struct {
    int rolls;
    int freed;
} dice;

static int32_t roll_dice(void *userdata, const char *input_json, tooloop_tool_result *result) {
    dice *d = (dice *)userdata;
    char text[16];
    (void)input_json;
    d->rolls++;
    snprintf(text, sizeof text, "%d", d->rolls);
    CHECK_STATUS(tooloop_tool_result_set_text(result, text), TOOLOOP_OK);
    return 0;
}

static void free_dice(void *userdata) { ((dice *)userdata)->freed++; }

/* One agent with `config`, roll_dice registered (`idempotent` as given when >= 0), run once: the rolls that ran.
 * `*out` receives the run's result JSON (free with tooloop_string_free). */
static int run_once(const char *config, int idempotent, char **out) {
    static dice d;
    tooloop_agent *agent = NULL;
    d.rolls = 0;
    d.freed = 0;
    *out = NULL;
    CHECK_STATUS(tooloop_agent_new(config, &agent), TOOLOOP_OK);
    if (agent == NULL) return -1;
    CHECK_STATUS(tooloop_agent_add_tool(agent, "roll_dice", "Roll a die.", "{\"type\": \"object\"}", roll_dice, &d,
                                        free_dice),
                 TOOLOOP_OK);
    if (idempotent >= 0) {
        CHECK_STATUS(tooloop_agent_set_tool_idempotent(agent, "roll_dice", idempotent), TOOLOOP_OK);
    }
    CHECK_STATUS(tooloop_agent_run(agent, "roll four times", NULL, NULL, out), TOOLOOP_OK);
    tooloop_agent_free(agent);
    CHECK(d.freed == 1);
    return d.rolls;
}

int main(void) {
    const char *plain = "{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0}";
    const char *guarded = "{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"progress_guard\": true}";
    tooloop_agent *agent = NULL;
    char *result = NULL;

    require_env("TOOLOOP_MOCK_URL");

    /* The library's default: every roll runs. */
    CHECK(run_once(plain, -1, &result) == 4);
    CHECK_CONTAINS(result, "\"stop_reason\":\"end_turn\"");
    CHECK_NOT_CONTAINS(result, "same call and same input");
    tooloop_string_free(result);

    /* progress_guard on: the third identical call is refused. */
    CHECK(run_once(guarded, -1, &result) == 2);
    CHECK_CONTAINS(result, "not run: same call and same input as the previous 2 calls to roll_dice");
    tooloop_string_free(result);

    /* progress_guard on, the tool marked not idempotent: every roll runs. */
    CHECK(run_once(guarded, 0, &result) == 4);
    CHECK_NOT_CONTAINS(result, "same call and same input");
    tooloop_string_free(result);

    /* Misuse: no such tool, NULL arguments. */
    CHECK_STATUS(tooloop_agent_new(plain, &agent), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_tool_idempotent(agent, "nope", 0), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("no tool named 'nope'");
    CHECK_STATUS(tooloop_agent_set_tool_idempotent(agent, NULL, 0), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_set_tool_idempotent(NULL, "roll_dice", 0), TOOLOOP_INVALID_ARGUMENT);
    tooloop_agent_free(agent);
    return check_exit("repeat_calls");
}
