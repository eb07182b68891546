/* Structured output through the C API (tests/scenarios/c_output_schema.json): "output_schema" in the config
 * JSON, a first invalid answer sent back and corrected, the validated value under "output" in the result
 * JSON; with "output_retries": 0 an invalid answer fails the run with TOOLOOP_OUTPUT_INVALID, the errors and
 * the last answer in tooloop_last_error(). */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include "check.h"
#include "workers.h"

#define SCHEMA                                                                                          \
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"temp_c\": {\"type\": " \
    "\"number\"}}, \"required\": [\"city\", \"temp_c\"]}"

int main(void) {
    tooloop_agent *agent = NULL;
    char *result = NULL, *output = NULL, *city = NULL;

    require_env("ANTHROPIC_BASE_URL");
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"output_schema\": " SCHEMA "}",
                                   &agent),
                 TOOLOOP_OK);
    if (agent == NULL) return check_exit("output_schema");
    CHECK_STATUS(tooloop_agent_run(agent, "Weather in Paris as JSON", NULL, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"output\":{\"city\":\"Paris\",\"temp_c\":18}");
    CHECK_STATUS(tooloop_json_get(result, "/output", &output), TOOLOOP_OK);
    CHECK(output != NULL && strcmp(output, "{\"city\":\"Paris\",\"temp_c\":18}") == 0);
    CHECK_STATUS(tooloop_json_get(result, "/output/city", &city), TOOLOOP_OK);
    CHECK(city != NULL && strcmp(city, "Paris") == 0);
    CHECK_CONTAINS(result, "\"turns\":2");
    tooloop_string_free(city);
    tooloop_string_free(output);
    tooloop_string_free(result);
    tooloop_agent_free(agent);

    agent = NULL;
    result = NULL;
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"output_retries\": 0,"
                                   " \"output_schema\": " SCHEMA "}",
                                   &agent),
                 TOOLOOP_OK);
    if (agent == NULL) return check_exit("output_schema");
    CHECK_STATUS(tooloop_agent_run(agent, "Weather?", NULL, NULL, &result), TOOLOOP_OUTPUT_INVALID);
    CHECK(result == NULL);
    CHECK_LAST_ERROR("does not match output_schema");
    CHECK_LAST_ERROR("Last answer: it is warm");
    CHECK(strcmp(tooloop_status_str(TOOLOOP_OUTPUT_INVALID), "the final answer does not match output_schema") == 0);
    tooloop_agent_free(agent);
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("output_schema");
}
