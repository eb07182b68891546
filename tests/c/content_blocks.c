/* Content blocks through the C API (tests/scenarios/c_content_blocks.json): a run whose input is a JSON
 * array of blocks (text + a base64 PNG), a C tool that answers with blocks (text + a GIF), and an image over
 * the provider's size limit refused with TOOLOOP_CONFIG before anything is sent. run.sh runs it with
 * --requests-out, then as `content_blocks --requests FILE` to check that both images reached the requests
 * byte for byte and that the over-size one never did (two requests in all). */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "workers.h"

#define PNG "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
#define GIF "R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw=="

static int32_t screenshot(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)userdata;
    (void)input_json;
    return tooloop_tool_result_set_content(
        result, "[{\"type\": \"text\", \"text\": \"the screen:\"}, {\"type\": \"image\", \"source\": {\"type\": "
                "\"base64\", \"media_type\": \"image/gif\", \"data\": \"" GIF "\"}}]");
}

static int check_requests(const char *path) {
    char *all = check_read_file(path);
    char *first = NULL, *second = NULL, *n = NULL;
    CHECK(all != NULL);
    if (all == NULL) return check_exit("content_blocks --requests");
    CHECK_STATUS(tooloop_json_get(all, "/1/raw_body", &second), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(all, "/2", &n), TOOLOOP_NO_VALUE);
    CHECK_STATUS(tooloop_json_get(all, "/0/raw_body", &first), TOOLOOP_OK);
    /* The user's PNG, exactly, in the first request; the tool's GIF inside the tool_result of the second. */
    CHECK_CONTAINS(first, "\"media_type\":\"image/png\",\"data\":\"" PNG "\"");
    CHECK_CONTAINS(second, "\"type\":\"tool_result\"");
    CHECK_CONTAINS(second, "\"media_type\":\"image/gif\",\"data\":\"" GIF "\"");
    CHECK_CONTAINS(second, PNG);
    CHECK_NOT_CONTAINS(all, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    tooloop_string_free(first);
    tooloop_string_free(second);
    tooloop_string_free(n);
    free(all);
    return check_exit("content_blocks --requests");
}

int main(int argc, char **argv) {
    tooloop_agent *agent = NULL;
    char *result = NULL, *text = NULL, *big = NULL;
    const char *head = "[{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": \"";
    const char *tail = "\"}}]";
    size_t big_data = 7u * 1024u * 1024u; /* base64 chars: 5.25 MB decoded, over Anthropic's 5 MB */

    if (argc == 3 && strcmp(argv[1], "--requests") == 0) return check_requests(argv[2]);
    require_env("ANTHROPIC_BASE_URL");
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0}", &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("content_blocks");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "screenshot", "Take a screenshot.", "{\"type\": \"object\"}",
                                        screenshot, NULL, NULL),
                 TOOLOOP_OK);

    /* An over-size image, given to tooloop_agent_run as a JSON array: refused before anything is sent. */
    big = (char *)malloc(strlen(head) + big_data + strlen(tail) + 1);
    CHECK(big != NULL);
    if (big == NULL) return check_exit("content_blocks");
    strcpy(big, head);
    memset(big + strlen(head), 'A', big_data);
    strcpy(big + strlen(head) + big_data, tail);
    CHECK_STATUS(tooloop_agent_run(agent, big, NULL, NULL, &result), TOOLOOP_CONFIG);
    CHECK_LAST_ERROR("over the Anthropic limit of 5.00 MB per image");
    CHECK(result == NULL);
    free(big);

    /* Bad blocks are a clear argument error. */
    CHECK_STATUS(tooloop_agent_run_content(agent, "[{\"type\": \"image\"}]", NULL, NULL, &result),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("needs a \"source\"");
    CHECK_STATUS(tooloop_agent_run_content(agent, "not json", NULL, NULL, &result), TOOLOOP_INVALID_JSON);

    CHECK_STATUS(tooloop_agent_run_content(agent,
                                           "[{\"type\": \"text\", \"text\": \"What is in this picture?\"}, "
                                           "{\"type\": \"image\", \"source\": {\"type\": \"base64\", "
                                           "\"media_type\": \"image/png\", \"data\": \"" PNG "\"}}]",
                                           NULL, NULL, &result),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(result, "/text", &text), TOOLOOP_OK);
    CHECK(text != NULL && strstr(text, "red pixel") != NULL);
    CHECK_CONTAINS(result, "\"media_type\":\"image/gif\"");
    tooloop_string_free(text);
    tooloop_string_free(result);
    tooloop_agent_free(agent);
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("content_blocks");
}
