/* Text the project or the host supplies reaches a request only within bounds, through the C door:
 * - "instruction_files": true over a workspace whose AGENTS.md links to a private key outside it and whose
 *   sub/AGENTS.md links to /proc/self/environ, then a list naming a binary AGENTS.md: the requests the mock
 *   server recorded (checked in --requests mode) hold neither the key, nor the environment, nor the binary
 *   file, and do hold the base system prompt;
 * - a hook's text of 20 MB (before_tool's deny reason, after_tool's replacement, on_stop's continuation)
 *   reaches the (host) model cut like tool output, with the same marker. */
#define _DEFAULT_SOURCE
#include <sys/stat.h>
#include <unistd.h>

#include "tooloop.h"

#include "check.h"

#define KEY_MATERIAL "c-door-private-key-material-0042"
#define ENV_MARKER "c-door-environ-marker-0042"
#define HUGE_TEXT (20u * 1024u * 1024u)
#define MARKER "[output truncated:"

static char *huge(char letter) {
    char *s = (char *)malloc(HUGE_TEXT + 1);
    if (s == NULL) abort();
    memset(s, letter, HUGE_TEXT);
    s[HUGE_TEXT] = '\0';
    return s;
}

/* ---- hooks, on a host model ---- */

typedef struct {
    int calls;
    int stops;
} state;

static int32_t model(void *userdata, const char *request_json, tooloop_model_response *response) {
    state *s = (state *)userdata;
    s->calls++;
    CHECK(strlen(request_json) < 1024 * 1024);
    if (s->calls == 1) {
        return tooloop_model_response_set_json(
                   response,
                   "{\"content\": [{\"type\": \"tool_use\", \"id\": \"c1\", \"name\": \"look\", \"input\": {\"n\": 1}},"
                   "{\"type\": \"tool_use\", \"id\": \"c2\", \"name\": \"look\", \"input\": {\"n\": 2}}],"
                   " \"stop_reason\": \"tool_use\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 5}}") ==
                       TOOLOOP_OK
                   ? 0
                   : 1;
    }
    if (s->calls == 2) {
        CHECK_CONTAINS(request_json, "DDDDDDDDDD");
        CHECK_CONTAINS(request_json, "AAAAAAAAAA");
        CHECK_CONTAINS(request_json, MARKER);
    }
    if (s->calls == 3) {
        CHECK_CONTAINS(request_json, "SSSSSSSSSS");
        CHECK_CONTAINS(request_json, MARKER);
    }
    return tooloop_model_response_set_json(
               response, "{\"content\": [{\"type\": \"text\", \"text\": \"done\"}], \"stop_reason\": \"end_turn\","
                         " \"usage\": {\"input_tokens\": 10, \"output_tokens\": 5}}") == TOOLOOP_OK
               ? 0
               : 1;
}

static int32_t look(void *userdata, const char *input_json, tooloop_tool_result *result) {
    (void)userdata;
    (void)input_json;
    tooloop_tool_result_set_text(result, "looked");
    return 0;
}

static int32_t before_tool(void *userdata, const char *event_json, tooloop_hook_result *result) {
    (void)userdata;
    if (strstr(event_json, "\"n\":1")) {
        char *reason = huge('D');
        CHECK_STATUS(tooloop_hook_result_set_error(result, reason), TOOLOOP_OK);
        free(reason);
    }
    return 0;
}

static int32_t after_tool(void *userdata, const char *event_json, tooloop_hook_result *result) {
    (void)userdata;
    if (strstr(event_json, "\"id\":\"c2\"")) {
        char *text = huge('A');
        CHECK_STATUS(tooloop_hook_result_set_text(result, text), TOOLOOP_OK);
        free(text);
    }
    return 0;
}

static int32_t on_stop(void *userdata, const char *event_json, tooloop_hook_result *result) {
    state *s = (state *)userdata;
    (void)event_json;
    if (s->stops++ == 0) {
        char *text = huge('S');
        CHECK_STATUS(tooloop_hook_result_set_text(result, text), TOOLOOP_OK);
        free(text);
    }
    return 0;
}

static void hooks_are_capped(void) {
    state s = {0, 0};
    tooloop_agent *agent = NULL;
    char *result = NULL;
    CHECK_STATUS(tooloop_agent_new_with_model("{}", model, &s, NULL, &agent), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_add_tool(agent, "look", "Look.", "{\"type\": \"object\"}", look, NULL, NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "before_tool", before_tool, NULL, NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "after_tool", after_tool, NULL, NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_set_hook(agent, "on_stop", on_stop, &s, NULL), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "go", NULL, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"text\":\"done\"");
    CHECK(s.calls == 3);
    tooloop_string_free(result);
    tooloop_agent_free(agent);
}

/* ---- instruction files, against the mock server ---- */

static void run_with(const char *config) {
    tooloop_agent *agent = NULL;
    char *result = NULL;
    CHECK_STATUS(tooloop_agent_new(config, &agent), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "hi", NULL, NULL, &result), TOOLOOP_OK);
    tooloop_string_free(result);
    tooloop_agent_free(agent);
}

static void instructions_stay_where_named(void) {
    char cwd[1024], root[1200], path[1400], config[2048];
    FILE *f;
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(root, sizeof root, "%s/untrusted-text-%ld", cwd, (long)getpid());
    snprintf(path, sizeof path, "rm -rf '%s'", root);
    CHECK(system(path) == 0);
    CHECK(mkdir(root, 0700) == 0);
    snprintf(path, sizeof path, "%s/id_ed25519", root);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL) return;
    fputs(KEY_MATERIAL, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/ws", root);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/ws/.git", root);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/ws/sub", root);
    CHECK(mkdir(path, 0700) == 0);
    {
        char target[1400];
        snprintf(target, sizeof target, "%s/id_ed25519", root);
        snprintf(path, sizeof path, "%s/ws/AGENTS.md", root);
        CHECK(symlink(target, path) == 0);
        snprintf(path, sizeof path, "%s/ws/sub/AGENTS.md", root);
        CHECK(symlink("/proc/self/environ", path) == 0);
    }
    CHECK(setenv("C_DOOR_MARKER", ENV_MARKER, 1) == 0);
    snprintf(path, sizeof path, "%s/config", root);
    CHECK(setenv("XDG_CONFIG_HOME", path, 1) == 0);
    snprintf(config, sizeof config,
             "{\"model\": \"claude-sonnet-4-6\", \"stream\": false, \"system\": \"BASE PROMPT\","
             " \"workspace\": \"%s/ws/sub\", \"instruction_files\": true}",
             root);
    run_with(config);

    snprintf(path, sizeof path, "%s/ws/bin", root);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/ws/bin/AGENTS.md", root);
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f == NULL) return;
    fwrite("BINARY RULES\0\1\2", 1, 15, f);
    fclose(f);
    snprintf(config, sizeof config,
             "{\"model\": \"claude-sonnet-4-6\", \"stream\": false, \"system\": \"BASE PROMPT\","
             " \"workspace\": \"%s/ws/bin\", \"instruction_files\": [\"AGENTS.md\"]}",
             root);
    run_with(config);
    snprintf(path, sizeof path, "rm -rf '%s'", root);
    CHECK(system(path) == 0);
}

static int check_requests(const char *path) {
    char *all = check_read_file(path);
    CHECK(all != NULL);
    if (all == NULL) return check_exit("untrusted_text --requests");
    CHECK_CONTAINS(all, "BASE PROMPT");
    CHECK_NOT_CONTAINS(all, KEY_MATERIAL);
    CHECK_NOT_CONTAINS(all, ENV_MARKER);
    CHECK_NOT_CONTAINS(all, "BINARY RULES");
    free(all);
    return check_exit("untrusted_text --requests");
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--requests") == 0) return check_requests(argv[2]);
    hooks_are_capped();
    instructions_stay_where_named();
    return check_exit("untrusted_text");
}
