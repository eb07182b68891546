/* A tool-using loop against the mock server (tests/scenarios/c_two_tools.json): the model asks for two C
 * tools in one turn, both run with the input the model wrote, their results go back in the next request,
 * the model answers. Events stream in order; the run result, the conversation and the usage are right;
 * each tool's userdata_free runs exactly once, when the agent is freed. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include "check.h"
#include "workers.h"

typedef struct {
    int calls;
    int freed;
    char input[256];
} tool_state;

static int32_t get_weather(void *userdata, const char *input_json, tooloop_tool_result *result) {
    tool_state *st = (tool_state *)userdata;
    char *city = NULL;
    st->calls++;
    snprintf(st->input, sizeof st->input, "%s", input_json);
    if (tooloop_json_get(input_json, "/city", &city) != TOOLOOP_OK) {
        tooloop_tool_result_set_error(result, "city is missing");
        return 0;
    }
    CHECK(strcmp(city, "Paris") == 0);
    tooloop_string_free(city);
    CHECK(!tooloop_tool_result_is_cancelled(result));
    CHECK_STATUS(tooloop_tool_result_set_text(result, "18 \xc2\xb0" "C, sunny"), TOOLOOP_OK);
    return 0;
}

static int32_t get_time(void *userdata, const char *input_json, tooloop_tool_result *result) {
    tool_state *st = (tool_state *)userdata;
    st->calls++;
    snprintf(st->input, sizeof st->input, "%s", input_json);
    /* A first answer replaced by a second: the last set wins. */
    tooloop_tool_result_set_error(result, "not yet");
    CHECK_STATUS(tooloop_tool_result_set_text(result, "{\"time\": \"14:05\"}"), TOOLOOP_OK);
    return 0;
}

static void free_state(void *userdata) { ((tool_state *)userdata)->freed++; }

typedef struct {
    int count[9];
    int order_ok;
    int last_type;
    char text[1024];
    char tool_uses[128];
    char tool_results[512];
} event_log;

static void on_event(void *userdata, const tooloop_event *ev) {
    event_log *log = (event_log *)userdata;
    char want[64];
    CHECK(ev != NULL && ev->json != NULL);
    if (ev->type >= 1 && ev->type <= 8) log->count[ev->type]++;
    /* Every event's json names its type; text is set exactly for the delta events. */
    switch (ev->type) {
    case TOOLOOP_EVENT_TURN_START: snprintf(want, sizeof want, "{\"type\":\"turn_start\""); break;
    case TOOLOOP_EVENT_TEXT: snprintf(want, sizeof want, "{\"type\":\"text\""); break;
    case TOOLOOP_EVENT_TOOL_INPUT_DELTA: snprintf(want, sizeof want, "{\"type\":\"tool_input_delta\""); break;
    case TOOLOOP_EVENT_TOOL_USE: snprintf(want, sizeof want, "{\"type\":\"tool_use\""); break;
    case TOOLOOP_EVENT_TOOL_RESULT: snprintf(want, sizeof want, "{\"type\":\"tool_result\""); break;
    case TOOLOOP_EVENT_USAGE: snprintf(want, sizeof want, "{\"type\":\"usage\""); break;
    case TOOLOOP_EVENT_TURN_END: snprintf(want, sizeof want, "{\"type\":\"turn_end\""); break;
    default: snprintf(want, sizeof want, "{\"type\":\""); break;
    }
    CHECK(strncmp(ev->json, want, strlen(want)) == 0);
    if (ev->type == TOOLOOP_EVENT_TEXT || ev->type == TOOLOOP_EVENT_TOOL_INPUT_DELTA) {
        CHECK(ev->text != NULL);
    } else {
        CHECK(ev->text == NULL);
    }
    if (ev->type == TOOLOOP_EVENT_TEXT) strncat(log->text, ev->text, sizeof log->text - strlen(log->text) - 1);
    if (ev->type == TOOLOOP_EVENT_TOOL_USE) {
        char *name = NULL;
        CHECK_STATUS(tooloop_json_get(ev->json, "/name", &name), TOOLOOP_OK);
        strncat(log->tool_uses, name ? name : "?", sizeof log->tool_uses - strlen(log->tool_uses) - 2);
        strcat(log->tool_uses, ",");
        tooloop_string_free(name);
    }
    if (ev->type == TOOLOOP_EVENT_TOOL_RESULT) {
        strncat(log->tool_results, ev->json, sizeof log->tool_results - strlen(log->tool_results) - 1);
    }
    /* A turn starts before its text and ends after it. */
    if (ev->type == TOOLOOP_EVENT_TEXT && log->last_type == TOOLOOP_EVENT_TURN_END) log->order_ok = 0;
    log->last_type = ev->type;
}

int main(void) {
    tooloop_agent *agent = NULL;
    tool_state weather = {0, 0, ""}, clock = {0, 0, ""};
    event_log log;
    char *result = NULL, *messages = NULL, *usage = NULL, *history = NULL, *text = NULL;

    require_env("TOOLOOP_MOCK_URL");
    memset(&log, 0, sizeof log);
    log.order_ok = 1;

    /* Base URL and key come from the environment mockctl sets (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY). */
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"system\": \"Be brief.\", \"max_retries\": 0}",
                                   &agent),
                 TOOLOOP_OK);
    if (agent == NULL) return check_exit("tools_loop");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "get_weather", "Current weather in a city.",
                                        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
                                        " \"required\": [\"city\"]}",
                                        get_weather, &weather, free_state),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "get_time", "Current time in a timezone.",
                                        "{\"properties\": {\"timezone\": {\"type\": \"string\"}}}", get_time, &clock,
                                        free_state),
                 TOOLOOP_OK);

    CHECK_STATUS(tooloop_agent_run(agent, "What's the weather and the time in Paris?", on_event, &log, &result),
                 TOOLOOP_OK);
    CHECK(*tooloop_last_error() == '\0');

    /* Both tools ran once, with the model's input. */
    CHECK(weather.calls == 1 && clock.calls == 1);
    CHECK_CONTAINS(weather.input, "\"city\":\"Paris\"");
    CHECK_CONTAINS(clock.input, "\"timezone\":\"Europe/Paris\"");

    /* Events: two turns, text deltas in order, both tool calls and results. */
    CHECK(log.count[TOOLOOP_EVENT_TURN_START] == 2);
    CHECK(log.count[TOOLOOP_EVENT_TURN_END] == 2);
    CHECK(log.count[TOOLOOP_EVENT_TEXT] > 2); /* streamed in pieces of 8 characters */
    CHECK(log.count[TOOLOOP_EVENT_TOOL_INPUT_DELTA] >= 2);
    CHECK(log.count[TOOLOOP_EVENT_TOOL_USE] == 2);
    CHECK(log.count[TOOLOOP_EVENT_TOOL_RESULT] == 2);
    CHECK(log.count[TOOLOOP_EVENT_USAGE] >= 2);
    CHECK(log.order_ok);
    CHECK(strcmp(log.text, "I'll check the weather and the local time in Paris."
                           "In Paris it is 18 \xc2\xb0" "C and sunny, and the time is 14:05.") == 0);
    CHECK(strcmp(log.tool_uses, "get_weather,get_time,") == 0);
    CHECK_CONTAINS(log.tool_results, "\"content\":\"18 \xc2\xb0" "C, sunny\",\"is_error\":false");
    CHECK_CONTAINS(log.tool_results, "\"content\":\"{\\\"time\\\": \\\"14:05\\\"}\",\"is_error\":false");

    /* The run result. */
    CHECK(result != NULL);
    CHECK_STATUS(tooloop_json_get(result, "/text", &text), TOOLOOP_OK);
    CHECK(text != NULL && strcmp(text, "In Paris it is 18 \xc2\xb0" "C and sunny, and the time is 14:05.") == 0);
    tooloop_string_free(text);
    CHECK_CONTAINS(result, "\"stop_reason\":\"end_turn\"");
    CHECK_CONTAINS(result, "\"turns\":2");
    CHECK_CONTAINS(result, "\"name\":\"get_weather\"");
    CHECK_CONTAINS(result, "\"name\":\"get_time\"");
    CHECK_CONTAINS(result, "\"max_turns_reached\":false");
    text = NULL;
    CHECK_STATUS(tooloop_json_get(result, "/tool_calls/1/output", &text), TOOLOOP_OK);
    CHECK(text != NULL && strcmp(text, "{\"time\": \"14:05\"}") == 0);
    tooloop_string_free(text);

    /* The conversation: both results in ONE user message right after the tool_use turn. */
    CHECK_STATUS(tooloop_agent_messages_json(agent, &messages), TOOLOOP_OK);
    CHECK_CONTAINS(messages, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What's the weather");
    CHECK_CONTAINS(messages, "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_c_weather\"");
    CHECK_CONTAINS(messages, "},{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_c_time\"");
    text = NULL;
    CHECK_STATUS(tooloop_json_get(messages, "/3/role", &text), TOOLOOP_OK);
    CHECK(text != NULL && strcmp(text, "assistant") == 0);
    tooloop_string_free(text);
    text = NULL;
    CHECK_STATUS(tooloop_json_get(messages, "/4", &text), TOOLOOP_NO_VALUE);
    CHECK(text == NULL);

    /* Usage summed over both turns (400 + 520 in, 80 + 25 out). */
    CHECK_STATUS(tooloop_agent_usage_json(agent, &usage), TOOLOOP_OK);
    CHECK_CONTAINS(usage, "\"input_tokens\":920");
    CHECK_CONTAINS(usage, "\"output_tokens\":105");

    CHECK_STATUS(tooloop_agent_history_json(agent, &history), TOOLOOP_OK);
    CHECK_CONTAINS(history, "\"role\":\"tool\"");
    CHECK_CONTAINS(history, "\"request_id\":\"req_mock_1\"");
    CHECK_NOT_CONTAINS(history, "\"status\":\"error\"");
    CHECK_NOT_CONTAINS(history, "sk-ant-mock"); /* the API key never lands in the conversation */

    tooloop_string_free(result);
    tooloop_string_free(messages);
    tooloop_string_free(usage);
    tooloop_string_free(history);

    CHECK(weather.freed == 0 && clock.freed == 0);
    tooloop_agent_free(agent);
    CHECK(weather.freed == 1 && clock.freed == 1);
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("tools_loop");
}
