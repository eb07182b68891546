/* The "check" config key and the evidence in the result JSON (tests/scenarios/c_check_evidence.json): the
 * check fails on the model's first answer and the run goes on; a write fixes it; the result JSON says the
 * check passed after two runs, with the file changed and the (no) commands run. An "after_check" hook sees
 * the failed check and its message, and the text it sets is what the model reads instead. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <unistd.h>

#include "check.h"

static void write_text(const char *path, const char *content) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f == NULL) return;
    CHECK(fputs(content, f) >= 0);
    CHECK(fclose(f) == 0);
}

typedef struct {
    int calls;
    int freed;
} seen_t;

static int32_t after_check(void *userdata, const char *event_json, tooloop_hook_result *result) {
    seen_t *seen = (seen_t *)userdata;
    seen->calls++;
    CHECK_CONTAINS(event_json, "\"check\":{\"command\":\"sh check.sh\",\"passed\":false,\"exit_code\":3");
    CHECK_CONTAINS(event_json, "out.txt is not fixed\\nexit code: 3\",\"runs\":1}"); /* the tail, the count */
    CHECK_CONTAINS(event_json, "\"message\":\"The check `sh check.sh` failed (exit 3):\\n");
    return tooloop_hook_result_set_text(result, "HINTED: write fixed into out.txt") == TOOLOOP_OK ? 0 : 1;
}

static void seen_free(void *userdata) { ((seen_t *)userdata)->freed++; }

int main(void) {
    char ws[] = "/tmp/tooloop-c-check-XXXXXX";
    char path[128], config[512];
    tooloop_agent *agent = NULL;
    char *result = NULL, *messages = NULL;
    seen_t seen = {0, 0};

    require_env("TOOLOOP_MOCK_URL");
    CHECK(mkdtemp(ws) != NULL);
    snprintf(path, sizeof path, "%s/check.sh", ws);
    write_text(path, "grep -q fixed out.txt || { echo 'out.txt is not fixed'; exit 3; }\n");
    snprintf(config, sizeof config,
             "{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"builtin_tools\": true, \"workspace\": \"%s\","
             " \"sandbox\": \"off\", \"stream\": false, \"check\": \"sh check.sh\", \"check_timeout\": 30}", ws);

    CHECK_STATUS(tooloop_agent_new(config, &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("check_evidence");
    CHECK_STATUS(tooloop_agent_set_hook(agent, "after_check", after_check, &seen, seen_free), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "fix out.txt", NULL, NULL, &result), TOOLOOP_OK);
    CHECK(seen.calls == 1);
    CHECK_STATUS(tooloop_agent_messages_json(agent, &messages), TOOLOOP_OK);
    if (messages != NULL) {
        CHECK_CONTAINS(messages, "HINTED: write fixed into out.txt");
        CHECK(strstr(messages, "The check `sh check.sh` failed") == NULL);
    }
    tooloop_string_free(messages);
    if (result != NULL) {
        CHECK_CONTAINS(result, "\"text\":\"Fixed.\"");
        CHECK_CONTAINS(result, "\"check\":{\"command\":\"sh check.sh\",\"passed\":true,\"exit_code\":0");
        CHECK_CONTAINS(result, "\"runs\":2}");
        CHECK_CONTAINS(result, "\"files_changed\":[\"out.txt\"]");
        CHECK_CONTAINS(result, "\"commands_run\":[]");
        CHECK_CONTAINS(result, "\"unverified\":null");
    }
    tooloop_string_free(result);
    tooloop_agent_free(agent);
    CHECK(seen.freed == 1);

    CHECK(unlink(path) == 0);
    snprintf(path, sizeof path, "%s/out.txt", ws);
    CHECK(unlink(path) == 0);
    CHECK(rmdir(ws) == 0);
    return check_exit("check_evidence");
}
