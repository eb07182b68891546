/* Read-only approvals from C (tooloop_permission_set_read_only) against the mock server
 * (tests/scenarios/c_read_only_approval.json): the permission callback lets every call run only as
 * read-only. Commands that look harmless but write (awk piping to sh, sort -o, a redirection) write
 * nothing, because the kernel's read-only sandbox holds bash; `cat` still reads; write_file, which cannot be
 * confined, is refused with a reason. The agent's own sandbox is off: the read-only approval alone confines. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "workers.h"

typedef struct {
    int calls;
    char results[4096];
} state;

static int32_t read_only(void *userdata, const char *call_json, tooloop_permission *answer) {
    (void)call_json;
    ((state *)userdata)->calls++;
    CHECK_STATUS(tooloop_permission_set_read_only(answer), TOOLOOP_OK);
    return 0;
}

static void on_event(void *userdata, const tooloop_event *ev) {
    state *s = (state *)userdata;
    if (ev->type == TOOLOOP_EVENT_TOOL_RESULT) {
        strncat(s->results, ev->json, sizeof s->results - strlen(s->results) - 1);
    }
}

/* How many entries of `dir` start with "pwned". */
static int pwned_files(const char *dir) {
    int n = 0;
    struct dirent *e;
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "pwned", 5) == 0) n++;
    }
    closedir(d);
    return n;
}

int main(void) {
    char ws[] = "/tmp/tooloop-c-ro-XXXXXX";
    char config[512], path[600];
    tooloop_agent *agent = NULL;
    state s;
    FILE *f;

    require_env("TOOLOOP_MOCK_URL");
    memset(&s, 0, sizeof s);
    CHECK_STATUS(tooloop_permission_set_read_only(NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK(mkdtemp(ws) != NULL);
    snprintf(path, sizeof path, "%s/notes.txt", ws);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL) return check_exit("read_only_approval");
    fputs("alpha\n", f);
    fclose(f);

    snprintf(config, sizeof config,
             "{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"builtin_tools\": true, \"sandbox\": \"off\", \"workspace\": \"%s\"}",
             ws);
    CHECK_STATUS(tooloop_agent_new(config, &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("read_only_approval");
    CHECK_STATUS(tooloop_agent_set_permission(agent, read_only, &s, NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "Look around.", on_event, &s, NULL), TOOLOOP_OK);
    CHECK(s.calls == 5);
    CHECK(pwned_files(ws) == 0);
    /* With Landlock, cat reads under the read-only sandbox; without it (valgrind does not know Landlock's
     * system calls) every bash call is refused: either way nothing was written. */
    if (strstr(s.results, "the kernel cannot hold it") != NULL) {
        fprintf(stderr, "read_only_approval: no Landlock here: bash refused, as it must be\n");
    } else {
        CHECK_CONTAINS(s.results, "alpha");
    }
    CHECK_CONTAINS(s.results, "allowed only if it changes nothing");
    tooloop_agent_free(agent);
    CHECK(wait_http_workers(10.0) == 0);

    snprintf(path, sizeof path, "rm -rf '%s'", ws);
    CHECK(system(path) == 0);
    return check_exit("read_only_approval");
}
