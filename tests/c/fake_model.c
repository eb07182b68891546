/* A host model (the "fake brain"): no network. The model callback gets the request JSON and answers through
 * tooloop_model_response_set_json; a tool-using loop runs on it; invalid answers, a failing model, a
 * model that sees a cancel, and max_turns + resume each give their documented status; the model's
 * userdata_free runs exactly once, also when creating the agent fails. */
#include "tooloop.h"

#include "check.h"

typedef struct {
    int calls;
    int freed;
    int mode;
    tooloop_agent *agent;
    char last_request[4096];
} model_state;

enum { MODE_CALCULATOR, MODE_FAIL, MODE_NOTHING, MODE_BAD_JSON, MODE_NOT_A_MESSAGE, MODE_CANCEL, MODE_ALWAYS_TOOL, MODE_ARRAY_INPUT, MODE_TODO };

static const char *TOOL_TURN =
    "{\"id\": \"msg_fake_1\", \"role\": \"assistant\", \"model\": \"fake\", \"content\": ["
    "{\"type\": \"text\", \"text\": \"Let me add.\"},"
    "{\"type\": \"tool_use\", \"id\": \"toolu_fake_1\", \"name\": \"add\", \"input\": {\"a\": 2, \"b\": 3}}],"
    " \"stop_reason\": \"tool_use\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 5}}";

static int32_t model(void *userdata, const char *request_json, tooloop_model_response *response) {
    model_state *st = (model_state *)userdata;
    st->calls++;
    snprintf(st->last_request, sizeof st->last_request, "%s", request_json);
    switch (st->mode) {
    case MODE_CALCULATOR:
        if (st->calls == 1) {
            CHECK_CONTAINS(request_json, "\"model\":\"fake-model\"");
            CHECK_CONTAINS(request_json, "\"system\":\"You add numbers.\"");
            CHECK_CONTAINS(request_json, "\"tools\":[{\"name\":\"add\"");
            CHECK_CONTAINS(request_json, "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"2 + 3?\"}]}]");
            return tooloop_model_response_set_json(response, TOOL_TURN) == TOOLOOP_OK ? 0 : 1;
        }
        /* The second request carries the tool's result for toolu_fake_1. */
        CHECK_CONTAINS(request_json, "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_fake_1\",\"content\":\"5\"}");
        CHECK_STATUS(tooloop_model_response_set_json(
                         response, "{\"content\": [{\"type\": \"text\", \"text\": \"2 + 3 = 5\"}],"
                                   " \"stop_reason\": \"end_turn\", \"usage\": {\"input_tokens\": 20, \"output_tokens\": 7}}"),
                     TOOLOOP_OK);
        return 0;
    case MODE_FAIL:
        tooloop_model_response_set_json(response, TOOL_TURN); /* set, then fail anyway: the failure wins */
        return 42;
    case MODE_NOTHING:
        return 0;
    case MODE_BAD_JSON:
        CHECK_STATUS(tooloop_model_response_set_json(response, "{\"content\": ["), TOOLOOP_INVALID_JSON);
        return 0;
    case MODE_NOT_A_MESSAGE:
        /* A valid answer first, then a rejected one: the rejection wins (the last set counts). */
        CHECK_STATUS(tooloop_model_response_set_json(response, TOOL_TURN), TOOLOOP_OK);
        CHECK_STATUS(tooloop_model_response_set_json(response, "{\"content\": [], \"stop_reason\": \"because\"}"),
                     TOOLOOP_INVALID_ARGUMENT);
        CHECK_LAST_ERROR("unknown stop_reason");
        CHECK_STATUS(tooloop_model_response_set_json(response, "[1, 2]"), TOOLOOP_INVALID_ARGUMENT);
        CHECK_STATUS(tooloop_model_response_set_json(
                         response, "{\"content\": [], \"stop_reason\": \"end_turn\", \"role\": \"user\"}"),
                     TOOLOOP_INVALID_ARGUMENT);
        CHECK_LAST_ERROR("\"role\" must be \"assistant\"");
        CHECK_STATUS(tooloop_model_response_set_json(response, "{\"content\": [{\"text\": \"no type\"}], \"stop_reason\": \"end_turn\"}"),
                     TOOLOOP_INVALID_ARGUMENT);
        CHECK_LAST_ERROR("content[0] must be an object with a \"type\" string");
        return 0;
    case MODE_CANCEL:
        CHECK(!tooloop_model_response_is_cancelled(response));
        CHECK_STATUS(tooloop_agent_cancel(st->agent), TOOLOOP_OK);
        CHECK(tooloop_model_response_is_cancelled(response));
        return 1;
    case MODE_ARRAY_INPUT:
        /* A weak model's call whose input is not an object: stored (and sent back) as {}, never run. */
        if (st->calls == 1) {
            return tooloop_model_response_set_json(
                       response, "{\"content\": [{\"type\": \"tool_use\", \"id\": \"toolu_arr\", \"name\": \"add\","
                                 " \"input\": [1, 2]}], \"stop_reason\": \"tool_use\"}") == TOOLOOP_OK
                       ? 0
                       : 1;
        }
        return tooloop_model_response_set_json(response, "{\"content\": \"ok\"}") == TOOLOOP_OK ? 0 : 1;
    case MODE_TODO:
        /* Plans with the todo tool (config "planning": true), then answers. */
        if (st->calls == 1) {
            CHECK_CONTAINS(request_json, "\"name\":\"todo_write\"");
            return tooloop_model_response_set_json(
                       response,
                       "{\"content\": [{\"type\": \"tool_use\", \"id\": \"toolu_todo\", \"name\": \"todo_write\","
                       " \"input\": {\"todos\": [{\"content\": \"Add the numbers\", \"status\": \"completed\"},"
                       " {\"content\": \"Report the sum\", \"status\": \"in_progress\"}]}}]}") == TOOLOOP_OK
                       ? 0
                       : 1;
        }
        return tooloop_model_response_set_json(response, "{\"content\": \"5\"}") == TOOLOOP_OK ? 0 : 1;
    case MODE_ALWAYS_TOOL:
    default:
        return tooloop_model_response_set_json(response, TOOL_TURN) == TOOLOOP_OK ? 0 : 1;
    }
}

static void model_free(void *userdata) { ((model_state *)userdata)->freed++; }

typedef struct {
    int calls;
} add_state;

static int32_t add_tool(void *userdata, const char *input_json, tooloop_tool_result *result) {
    char *a = NULL, *b = NULL, out[32];
    ((add_state *)userdata)->calls++;
    CHECK_STATUS(tooloop_json_get(input_json, "/a", &a), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(input_json, "/b", &b), TOOLOOP_OK);
    snprintf(out, sizeof out, "%d", atoi(a ? a : "0") + atoi(b ? b : "0"));
    tooloop_string_free(a);
    tooloop_string_free(b);
    tooloop_tool_result_set_text(result, out);
    return 0;
}

static const char *ADD_SCHEMA =
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}},"
    " \"required\": [\"a\", \"b\"]}";

/* A new fake-model agent with the `add` tool, in `mode`. */
static tooloop_agent *fake_agent(model_state *st, add_state *tool, int mode, const char *config) {
    tooloop_agent *agent = NULL;
    memset(st, 0, sizeof *st);
    st->mode = mode;
    CHECK_STATUS(tooloop_agent_new_with_model(config, model, st, model_free, &agent), TOOLOOP_OK);
    if (agent == NULL) exit(check_exit("fake_model"));
    st->agent = agent;
    CHECK_STATUS(tooloop_agent_add_tool(agent, "add", "Add two integers.", ADD_SCHEMA, add_tool, tool, NULL),
                 TOOLOOP_OK);
    return agent;
}

static int text_events, todo_events;
static void count_text(void *userdata, const tooloop_event *ev) {
    (void)userdata;
    if (ev->type == TOOLOOP_EVENT_TEXT) text_events++;
    if (ev->type == TOOLOOP_EVENT_TODO) {
        todo_events++;
        CHECK_CONTAINS(ev->json, "\"type\":\"todo\",\"todos\":[{\"content\":\"Add the numbers\"");
    }
}

int main(void) {
    model_state st;
    add_state tool = {0};
    tooloop_agent *agent = NULL;
    char *result = NULL, *usage = NULL, *text = NULL, *messages = NULL;
    const char *config = "{\"model\": \"fake-model\", \"system\": \"You add numbers.\"}";

    /* 1. A tool-using loop on the fake model. */
    agent = fake_agent(&st, &tool, MODE_CALCULATOR, config);
    CHECK_STATUS(tooloop_agent_run(agent, "2 + 3?", count_text, NULL, &result), TOOLOOP_OK);
    CHECK(st.calls == 2 && tool.calls == 1);
    CHECK(text_events == 2); /* "Let me add." and "2 + 3 = 5": the host model's text reaches the events too */
    CHECK_STATUS(tooloop_json_get(result, "/text", &text), TOOLOOP_OK);
    CHECK(text != NULL && strcmp(text, "2 + 3 = 5") == 0);
    tooloop_string_free(text);
    CHECK_CONTAINS(result, "\"turns\":2");
    tooloop_string_free(result);
    CHECK_STATUS(tooloop_agent_usage_json(agent, &usage), TOOLOOP_OK);
    CHECK_CONTAINS(usage, "\"input_tokens\":30");
    CHECK_CONTAINS(usage, "\"output_tokens\":12");
    tooloop_string_free(usage);
    tooloop_agent_free(agent);
    CHECK(st.freed == 1);

    /* 2. The model callback returns non-zero: TOOLOOP_MODEL_FAILED, nothing recorded as an answer. */
    agent = fake_agent(&st, &tool, MODE_FAIL, config);
    result = (char *)"untouched";
    CHECK_STATUS(tooloop_agent_run(agent, "hello", NULL, NULL, &result), TOOLOOP_MODEL_FAILED);
    CHECK_LAST_ERROR("tooloop_agent_run: the host model callback returned 42");
    CHECK(strcmp(result, "untouched") == 0);
    CHECK_STATUS(tooloop_agent_messages_json(agent, &messages), TOOLOOP_OK);
    CHECK_NOT_CONTAINS(messages, "toolu_fake_1");
    tooloop_string_free(messages);
    tooloop_agent_free(agent);
    CHECK(st.freed == 1);

    /* 3. The callback returns 0 without an answer: TOOLOOP_INVALID_RESPONSE naming the setter. */
    agent = fake_agent(&st, &tool, MODE_NOTHING, config);
    CHECK_STATUS(tooloop_agent_run(agent, "hello", NULL, NULL, NULL), TOOLOOP_INVALID_RESPONSE);
    CHECK_LAST_ERROR("without a response: call tooloop_model_response_set_json");
    tooloop_agent_free(agent);

    /* 4. Invalid JSON, then a message without stop_reason / with the wrong role: each set fails, and the
     *    run fails with the reason even though the callback returned 0. */
    agent = fake_agent(&st, &tool, MODE_BAD_JSON, config);
    CHECK_STATUS(tooloop_agent_run(agent, "hello", NULL, NULL, NULL), TOOLOOP_INVALID_RESPONSE);
    CHECK_LAST_ERROR("rejected: json is not valid JSON");
    tooloop_agent_free(agent);
    agent = fake_agent(&st, &tool, MODE_NOT_A_MESSAGE, config);
    CHECK_STATUS(tooloop_agent_run(agent, "hello", NULL, NULL, NULL), TOOLOOP_INVALID_RESPONSE);
    CHECK_LAST_ERROR("content[0] must be an object");
    CHECK(tool.calls == 1); /* the valid answer set before the rejected one never ran the tool */
    tooloop_agent_free(agent);

    /* 5. The run is cancelled while the model runs: the model sees it and returns non-zero: CANCELLED. */
    agent = fake_agent(&st, &tool, MODE_CANCEL, config);
    CHECK_STATUS(tooloop_agent_run(agent, "hello", NULL, NULL, NULL), TOOLOOP_CANCELLED);
    CHECK_LAST_ERROR("cancelled");
    tooloop_agent_free(agent);

    /* 6. max_turns: a model that always calls the tool stops after 2 turns, the conversation stays valid,
     *    and resume goes on for 2 more turns without re-running the tools that ran. */
    agent = fake_agent(&st, &tool, MODE_ALWAYS_TOOL, "{\"max_turns\": 2}");
    tool.calls = 0;
    CHECK_STATUS(tooloop_agent_run(agent, "loop", NULL, NULL, NULL), TOOLOOP_MAX_TURNS);
    CHECK_LAST_ERROR("max_turns=2");
    CHECK(st.calls == 2 && tool.calls == 2);
    CHECK_CONTAINS(st.last_request, "\"model\":\"host\""); /* the default model name of a host agent */
    CHECK_STATUS(tooloop_agent_resume(agent, NULL, NULL, NULL), TOOLOOP_MAX_TURNS);
    CHECK(st.calls == 4 && tool.calls == 4);
    tooloop_agent_free(agent);

    /* 8. A tool input that is not an object: the messages view holds exactly what the next request sent. */
    agent = fake_agent(&st, &tool, MODE_ARRAY_INPUT, config);
    tool.calls = 0;
    CHECK_STATUS(tooloop_agent_run(agent, "add", NULL, NULL, NULL), TOOLOOP_OK);
    CHECK(tool.calls == 0 && st.calls == 2);
    CHECK_CONTAINS(st.last_request, "\"name\":\"add\",\"input\":{}}");
    CHECK_CONTAINS(st.last_request, "must be a JSON object");
    CHECK_STATUS(tooloop_agent_messages_json(agent, &messages), TOOLOOP_OK);
    CHECK_CONTAINS(messages, "\"name\":\"add\",\"input\":{}}");
    CHECK_NOT_CONTAINS(messages, "[1,2]}");
    tooloop_string_free(messages);
    tooloop_agent_free(agent);

    /* 9. Planning: the host reads the todo list the model wrote, and saw it change in the events. */
    agent = fake_agent(&st, &tool, MODE_TODO, "{\"planning\": true}");
    CHECK_STATUS(tooloop_agent_todos_json(agent, &messages), TOOLOOP_OK);
    CHECK(messages != NULL && strcmp(messages, "[]") == 0);
    tooloop_string_free(messages);
    CHECK_STATUS(tooloop_agent_run(agent, "plan", count_text, NULL, NULL), TOOLOOP_OK);
    CHECK(todo_events == 1);
    CHECK_STATUS(tooloop_agent_todos_json(agent, &messages), TOOLOOP_OK);
    CHECK_CONTAINS(messages, "{\"content\":\"Report the sum\",\"status\":\"in_progress\"}");
    tooloop_string_free(messages);
    CHECK_STATUS(tooloop_agent_todos_json(NULL, &messages), TOOLOOP_INVALID_ARGUMENT);
    tooloop_agent_free(agent);

    /* 7. The model's userdata_free runs exactly once when creating the agent fails, whatever the reason. */
    memset(&st, 0, sizeof st);
    agent = NULL;
    CHECK_STATUS(tooloop_agent_new_with_model("{\"provider\": \"anthropic\"}", model, &st, model_free, &agent),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("leave \"provider\" out or set it to \"host\"");
    CHECK(st.freed == 1 && agent == NULL);
    CHECK_STATUS(tooloop_agent_new_with_model("{\"modle\": \"x\"}", model, &st, model_free, &agent),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("config key \"modle\": unknown option");
    CHECK(st.freed == 2);
    CHECK_STATUS(tooloop_agent_new_with_model("{}", NULL, &st, model_free, &agent), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("model is NULL");
    CHECK(st.freed == 3);
    CHECK_STATUS(tooloop_agent_new_with_model("{}", model, &st, model_free, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK(st.freed == 4 && st.calls == 0);
    CHECK_STATUS(tooloop_agent_new_with_model("{}", model, NULL, NULL, &agent), TOOLOOP_OK); /* no destructor */
    tooloop_agent_free(agent);

    return check_exit("fake_model");
}
