/* The permission hook of the C API (tooloop_agent_set_permission) against the mock server
 * (tests/scenarios/c_permission.json, three runs of two turns):
 * - run 1: the model calls delete_files and list_files in one turn; the hook denies delete_files with a
 *   reason and allows list_files. The denied tool's callback never runs, the allowed one does, and the
 *   next request carries the denial as an is_error tool_result with the reason;
 * - run 2: a hook that denies without a reason: the model reads the default one;
 * - run 3: the hook cleared: delete_files runs.
 * Around them: every hook's userdata_free runs exactly once across set, replace, clear, a refused set
 * (NULL agent, or during a run: TOOLOOP_BUSY) and tooloop_agent_free. The requests the mock recorded are
 * read back from its GET /_mock/requests endpoint. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "workers.h"

#define REASON "deleting files needs the user's approval"

typedef struct {
    int calls;
    int freed;
} counter;

static void count_free(void *userdata) { ((counter *)userdata)->freed++; }

static int32_t delete_files(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)input_json;
    ((counter *)userdata)->calls++;
    tooloop_tool_result_set_text(result, "deleted");
    return 0;
}

static int32_t list_files(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)input_json;
    ((counter *)userdata)->calls++;
    tooloop_tool_result_set_text(result, "a.txt\nb.txt");
    return 0;
}

typedef struct {
    char last_tool_use_id[64];
    char last_approval_id[64]; /* of the last TOOLOOP_EVENT_APPROVAL_REQUEST */
    int approvals;
    char tool_results[1024];
} event_log;

static void on_event(void *userdata, const tooloop_event *ev) {
    event_log *log = (event_log *)userdata;
    if (ev->type == TOOLOOP_EVENT_TOOL_USE) {
        char *id = NULL;
        CHECK_STATUS(tooloop_json_get(ev->json, "/id", &id), TOOLOOP_OK);
        snprintf(log->last_tool_use_id, sizeof log->last_tool_use_id, "%s", id ? id : "");
        tooloop_string_free(id);
    }
    if (ev->type == TOOLOOP_EVENT_APPROVAL_REQUEST) {
        char *id = NULL;
        CHECK_STATUS(tooloop_json_get(ev->json, "/id", &id), TOOLOOP_OK);
        CHECK(id != NULL && strcmp(id, log->last_tool_use_id) == 0); /* after its call's TOOL_USE */
        snprintf(log->last_approval_id, sizeof log->last_approval_id, "%s", id ? id : "");
        tooloop_string_free(id);
        log->approvals++;
    }
    if (ev->type == TOOLOOP_EVENT_TOOL_RESULT) {
        strncat(log->tool_results, ev->json, sizeof log->tool_results - strlen(log->tool_results) - 1);
    }
}

typedef struct {
    int calls;
    int freed;
    int give_reason;
    char names[128];
    tooloop_agent *agent;
    const event_log *log;
    counter refused; /* userdata of a set_permission refused with TOOLOOP_BUSY from inside the hook */
} policy;

static void free_policy(void *userdata) { ((policy *)userdata)->freed++; }

static int32_t allow_all(void *userdata, const char *call_json, tooloop_permission *answer) {
    (void)call_json;
    (void)answer;
    ((policy *)userdata)->calls++;
    return 0;
}

/* Denies delete_files (with REASON when give_reason is set, else with no reason), allows the rest. */
static int32_t deny_deletes(void *userdata, const char *call_json, tooloop_permission *answer) {
    policy *p = (policy *)userdata;
    char *id = NULL, *name = NULL, *path = NULL;
    int deny;
    p->calls++;
    /* call_json is {"id", "name", "input"}, asked after the call's TOOL_USE event. */
    CHECK_STATUS(tooloop_json_get(call_json, "/id", &id), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(call_json, "/name", &name), TOOLOOP_OK);
    CHECK_STATUS(tooloop_json_get(call_json, "/input/path", &path), TOOLOOP_OK);
    CHECK(id != NULL && strcmp(id, p->log->last_tool_use_id) == 0);
    /* ... and after its TOOLOOP_EVENT_APPROVAL_REQUEST, which a UI draws the question from. */
    CHECK(id != NULL && strcmp(id, p->log->last_approval_id) == 0);
    CHECK(path != NULL);
    strncat(p->names, name ? name : "?", sizeof p->names - strlen(p->names) - 2);
    strcat(p->names, ",");

    /* The hook cannot be changed while a run is in progress, not even from inside it; the userdata of the
     * refused call is freed before it returns. */
    CHECK_STATUS(tooloop_agent_set_permission(p->agent, allow_all, &p->refused, count_free), TOOLOOP_BUSY);
    CHECK_LAST_ERROR("a run is in progress");

    deny = name != NULL && strcmp(name, "delete_files") == 0;
    if (deny && p->give_reason) {
        /* Rejected reasons, then a good one: the last successful set wins. */
        CHECK_STATUS(tooloop_permission_set_reason(answer, NULL), TOOLOOP_INVALID_ARGUMENT);
        CHECK_STATUS(tooloop_permission_set_reason(answer, "bad \xff reason"), TOOLOOP_INVALID_UTF8);
        CHECK_STATUS(tooloop_permission_set_reason(answer, "a first reason"), TOOLOOP_OK);
        CHECK_STATUS(tooloop_permission_set_reason(answer, REASON), TOOLOOP_OK);
    }
    if (!deny) {
        /* A reason on an allowed call is ignored. */
        CHECK_STATUS(tooloop_permission_set_reason(answer, "ignored"), TOOLOOP_OK);
    }
    tooloop_string_free(id);
    tooloop_string_free(name);
    tooloop_string_free(path);
    return deny ? 7 : 0;
}

/* The requests the mock server recorded (a JSON array), read with a plain HTTP/1.0 GET of
 * /_mock/requests; NULL on failure. Free with free(). */
static char *mock_requests(void) {
    const char *url = require_env("TOOLOOP_MOCK_URL");
    const char *colon = strrchr(url, ':');
    const char *get = "GET /_mock/requests HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    struct sockaddr_in addr;
    struct timeval timeout = {10, 0};
    size_t len = 0, cap = 65536;
    char *buf, *body;
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || colon == NULL) return NULL;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(colon + 1));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    buf = malloc(cap);
    if (buf == NULL || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        write(fd, get, strlen(get)) != (ssize_t)strlen(get)) {
        free(buf);
        close(fd);
        return NULL;
    }
    /* HTTP/1.0 without keep-alive: the server closes after the response. */
    while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) break;
            buf = bigger;
            cap *= 2;
        }
    }
    close(fd);
    buf[len] = '\0';
    body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0 || body == NULL) {
        fprintf(stderr, "GET /_mock/requests failed: %.200s\n", buf);
        free(buf);
        return NULL;
    }
    memmove(buf, body + 4, strlen(body + 4) + 1);
    return buf;
}

/* The value at `pointer` in `json` equals `want` (NULL: there is no value there). */
#define CHECK_JSON(json, pointer, want)                                                                         \
    do {                                                                                                        \
        char *got_json_ = NULL;                                                                                 \
        const char *want_ = (want);                                                                             \
        tooloop_status s_ = tooloop_json_get((json), (pointer), &got_json_);                                    \
        if (want_ == NULL ? s_ != TOOLOOP_NO_VALUE : (s_ != TOOLOOP_OK || strcmp(got_json_, want_) != 0)) {     \
            fprintf(stderr, "%s:%d: at %s expected %s, got %s (status %d)\n", __FILE__, __LINE__, (pointer),   \
                    want_ ? want_ : "(no value)", got_json_ ? got_json_ : "(no value)", (int)s_);              \
            check_failures++;                                                                                   \
        }                                                                                                       \
        tooloop_string_free(got_json_);                                                                         \
    } while (0)

int main(void) {
    tooloop_agent *agent = NULL;
    counter deleted = {0, 0}, listed = {0, 0}, orphan = {0, 0}, cleared = {0, 0};
    policy replaced, strict, silent, last;
    event_log log;
    char *result = NULL, *requests = NULL;

    require_env("TOOLOOP_MOCK_URL");
    memset(&replaced, 0, sizeof replaced);
    memset(&strict, 0, sizeof strict);
    memset(&silent, 0, sizeof silent);
    memset(&last, 0, sizeof last);
    memset(&log, 0, sizeof log);

    /* A NULL agent: TOOLOOP_INVALID_ARGUMENT, and the userdata goes back at once. */
    CHECK_STATUS(tooloop_agent_set_permission(NULL, allow_all, &orphan, count_free), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("agent is NULL");
    CHECK(orphan.freed == 1);
    CHECK_STATUS(tooloop_permission_set_reason(NULL, "x"), TOOLOOP_INVALID_ARGUMENT);

    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0}", &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("permission");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "delete_files", "Delete files.",
                                        "{\"properties\": {\"path\": {\"type\": \"string\"}}}", delete_files,
                                        &deleted, count_free),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "list_files", "List files.",
                                        "{\"properties\": {\"path\": {\"type\": \"string\"}}}", list_files, &listed,
                                        count_free),
                 TOOLOOP_OK);

    /* Set, then replace: the replaced hook's userdata is freed by the replacing call, and it never runs. */
    CHECK_STATUS(tooloop_agent_set_permission(agent, allow_all, &replaced, free_policy), TOOLOOP_OK);
    CHECK(replaced.freed == 0);
    strict.give_reason = 1;
    strict.agent = agent;
    strict.log = &log;
    CHECK_STATUS(tooloop_agent_set_permission(agent, deny_deletes, &strict, free_policy), TOOLOOP_OK);
    CHECK(replaced.freed == 1 && strict.freed == 0);

    /* Run 1: delete_files denied with a reason, list_files allowed. */
    CHECK_STATUS(tooloop_agent_run(agent, "Clean up the build folder.", on_event, &log, &result), TOOLOOP_OK);
    CHECK(deleted.calls == 0);
    CHECK(listed.calls == 1);
    CHECK(strict.calls == 2);
    CHECK(log.approvals == 2); /* one TOOLOOP_EVENT_APPROVAL_REQUEST per question */
    CHECK(strcmp(strict.names, "delete_files,list_files,") == 0);
    CHECK(replaced.calls == 0);
    CHECK(strict.refused.freed == 2); /* one refused set per hook call, each freed once */
    CHECK_CONTAINS(log.tool_results,
                   "\"name\":\"delete_files\",\"content\":\"Permission denied: " REASON "\",\"is_error\":true");
    CHECK_CONTAINS(log.tool_results, "\"name\":\"list_files\",\"content\":\"a.txt\\nb.txt\",\"is_error\":false");
    CHECK_JSON(result, "/text", "I was not allowed to delete build/; the folder holds a.txt and b.txt.");
    CHECK_JSON(result, "/tool_calls/0/name", "delete_files");
    CHECK_JSON(result, "/tool_calls/0/is_error", "true");
    CHECK_JSON(result, "/tool_calls/0/output", "Permission denied: " REASON);
    CHECK_JSON(result, "/tool_calls/1/is_error", "false");
    tooloop_string_free(result);
    result = NULL;

    /* Run 2: a hook that denies without a reason. */
    silent.agent = agent;
    silent.log = &log;
    CHECK_STATUS(tooloop_agent_set_permission(agent, deny_deletes, &silent, free_policy), TOOLOOP_OK);
    CHECK(strict.freed == 1 && silent.freed == 0);
    CHECK_STATUS(tooloop_agent_run(agent, "Try again.", on_event, &log, NULL), TOOLOOP_OK);
    CHECK(deleted.calls == 0);
    CHECK(silent.calls == 1);
    CHECK(silent.refused.freed == 1);

    /* Run 3: the hook cleared (its userdata freed now; the one passed along is freed at once too). */
    CHECK_STATUS(tooloop_agent_set_permission(agent, NULL, &cleared, count_free), TOOLOOP_OK);
    CHECK(silent.freed == 1 && cleared.freed == 1);
    CHECK_STATUS(tooloop_agent_run(agent, "Now you may.", on_event, &log, NULL), TOOLOOP_OK);
    CHECK(deleted.calls == 1);
    CHECK(silent.calls == 1 && strict.calls == 2);
    CHECK(log.approvals == 3); /* no hook, no question, no approval request */

    /* What the model was sent: the denial as an is_error tool_result in the request after each denial. */
    requests = mock_requests();
    CHECK(requests != NULL);
    if (requests != NULL) {
        CHECK_JSON(requests, "/5/index", "5");
        CHECK_JSON(requests, "/6", NULL);
        /* Request 1: [user, assistant(tool_use x2), user(tool_result x2)]. */
        CHECK_JSON(requests, "/1/body/messages/2/role", "user");
        CHECK_JSON(requests, "/1/body/messages/2/content/0/type", "tool_result");
        CHECK_JSON(requests, "/1/body/messages/2/content/0/tool_use_id", "toolu_perm_delete");
        CHECK_JSON(requests, "/1/body/messages/2/content/0/is_error", "true");
        CHECK_JSON(requests, "/1/body/messages/2/content/0/content", "Permission denied: " REASON);
        CHECK_JSON(requests, "/1/body/messages/2/content/1/tool_use_id", "toolu_perm_list");
        CHECK_JSON(requests, "/1/body/messages/2/content/1/content", "a.txt\nb.txt");
        CHECK_JSON(requests, "/1/body/messages/2/content/1/is_error", NULL);
        /* Request 3: the default reason. */
        CHECK_JSON(requests, "/3/body/messages/6/content/0/tool_use_id", "toolu_perm_delete_2");
        CHECK_JSON(requests, "/3/body/messages/6/content/0/is_error", "true");
        CHECK_JSON(requests, "/3/body/messages/6/content/0/content",
                   "Permission denied: the host denied this tool call");
        /* Request 5: no hook, the tool ran. */
        CHECK_JSON(requests, "/5/body/messages/10/content/0/tool_use_id", "toolu_perm_delete_3");
        CHECK_JSON(requests, "/5/body/messages/10/content/0/content", "deleted");
        CHECK_JSON(requests, "/5/body/messages/10/content/0/is_error", NULL);
        CHECK_NOT_CONTAINS(requests, "a first reason");
        CHECK_NOT_CONTAINS(requests, "ignored");
    }
    free(requests);

    /* A hook still set when the agent is freed: its userdata is freed then, once; none of the others again. */
    CHECK_STATUS(tooloop_agent_set_permission(agent, allow_all, &last, free_policy), TOOLOOP_OK);
    CHECK(last.freed == 0);
    tooloop_agent_free(agent);
    CHECK(last.freed == 1 && last.calls == 0);
    CHECK(replaced.freed == 1 && strict.freed == 1 && silent.freed == 1 && cleared.freed == 1 && orphan.freed == 1);
    CHECK(strict.refused.freed == 2 && silent.refused.freed == 1);
    CHECK(deleted.freed == 1 && listed.freed == 1);
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("permission");
}
