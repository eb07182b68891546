/* The "check" config key and the evidence in the result JSON (tests/scenarios/c_check_evidence.json): the
 * check fails on the model's first answer and the run goes on; a write fixes it; the result JSON says the
 * check passed after two runs, with the file changed and the (no) commands run. */
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

int main(void) {
    char ws[] = "/tmp/tooloop-c-check-XXXXXX";
    char path[128], config[512];
    tooloop_agent *agent = NULL;
    char *result = NULL;

    require_env("TOOLOOP_MOCK_URL");
    CHECK(mkdtemp(ws) != NULL);
    snprintf(path, sizeof path, "%s/check.sh", ws);
    write_text(path, "grep -q fixed out.txt || { echo 'out.txt is not fixed'; exit 3; }\n");
    snprintf(config, sizeof config,
             "{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"builtin_tools\": true, \"workspace\": \"%s\","
             " \"sandbox\": \"off\", \"stream\": false, \"check\": \"sh check.sh\", \"check_timeout\": 30}", ws);

    CHECK_STATUS(tooloop_agent_new(config, &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("check_evidence");
    CHECK_STATUS(tooloop_agent_run(agent, "fix out.txt", NULL, NULL, &result), TOOLOOP_OK);
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

    CHECK(unlink(path) == 0);
    snprintf(path, sizeof path, "%s/out.txt", ws);
    CHECK(unlink(path) == 0);
    CHECK(rmdir(ws) == 0);
    return check_exit("check_evidence");
}
