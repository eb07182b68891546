/* Session files through the C doors: the "session" config key and
 * tooloop_agent_open_session refuse a file that is not a tooloop session and one written in a newer format
 * version (TOOLOOP_IO, the file untouched), a second agent cannot open a session another one holds, a last
 * line without its newline is kept, and a new session file is created 0600 in a 0700 folder. No server:
 * a host model answers. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static int32_t ok_model(void *userdata, const char *request_json, tooloop_model_response *response) {
    (void)userdata;
    (void)request_json;
    return tooloop_model_response_set_json(
               response, "{\"content\": [{\"type\": \"text\", \"text\": \"ok\"}], \"stop_reason\": \"end_turn\"}") ==
                   TOOLOOP_OK
               ? 0
               : 1;
}

static void write_file(const char *path, const char *content) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f == NULL) return;
    CHECK(fputs(content, f) >= 0);
    CHECK(fclose(f) == 0);
}

/* The file holds exactly `content` (a refused file must not be touched). */
static void check_file(const char *path, const char *content) {
    char buf[1024];
    size_t n;
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f == NULL) return;
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    CHECK(strcmp(buf, content) == 0);
}

static tooloop_status new_agent(const char *session, tooloop_agent **out) {
    char config[512];
    if (session == NULL) return tooloop_agent_new_with_model("{}", ok_model, NULL, NULL, out);
    snprintf(config, sizeof config, "{\"session\": \"%s\"}", session);
    return tooloop_agent_new_with_model(config, ok_model, NULL, NULL, out);
}

#define HEADER "{\"type\":\"session\",\"version\":1,\"created_at\":1}\n"
#define ENTRY                                                                                                \
    "{\"type\":\"entry\",\"entry\":{\"id\":\"e1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":" \
    "\"kept without newline\"}],\"status\":\"complete\",\"created_at\":1}}"

int main(void) {
    tooloop_agent *a = NULL, *b = NULL;
    char dir[] = "/tmp/tooloop-c-session-files-XXXXXX";
    char notes[256], newer[256], held[256], unterminated[256], sub[256], created[256];
    char *m = NULL;
    struct stat st;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(notes, sizeof notes, "%s/notes.jsonl", dir);
    snprintf(newer, sizeof newer, "%s/newer.jsonl", dir);
    snprintf(held, sizeof held, "%s/held.jsonl", dir);
    snprintf(unterminated, sizeof unterminated, "%s/unterminated.jsonl", dir);
    snprintf(sub, sizeof sub, "%s/private", dir);
    snprintf(created, sizeof created, "%s/private/s.jsonl", dir);

    /* 1. Not a tooloop session: refused by both doors, untouched. */
    write_file(notes, "{\"todo\": \"milk\"}\n");
    CHECK_STATUS(new_agent(notes, &a), TOOLOOP_IO);
    CHECK_LAST_ERROR("is not a tooloop session");
    CHECK(a == NULL);
    CHECK_STATUS(new_agent(NULL, &b), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_open_session(b, notes), TOOLOOP_IO);
    CHECK_LAST_ERROR("is not a tooloop session");
    check_file(notes, "{\"todo\": \"milk\"}\n");

    /* 2. A newer format version: refused, untouched. */
    write_file(newer, "{\"type\":\"session\",\"version\":2}\n");
    CHECK_STATUS(tooloop_agent_open_session(b, newer), TOOLOOP_IO);
    CHECK_LAST_ERROR("newer tooloop");
    CHECK_STATUS(new_agent(newer, &a), TOOLOOP_IO);
    check_file(newer, "{\"type\":\"session\",\"version\":2}\n");

    /* 3. One writer at a time: b cannot open what a holds, until a is freed. */
    CHECK_STATUS(new_agent(held, &a), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_open_session(b, held), TOOLOOP_IO);
    CHECK_LAST_ERROR("is in use");
    tooloop_agent_free(a);
    a = NULL;
    CHECK_STATUS(tooloop_agent_open_session(b, held), TOOLOOP_OK);
    tooloop_agent_free(b);
    b = NULL;

    /* 4. A complete last line without its newline is kept, and the next entry goes on its own line. */
    write_file(unterminated, HEADER ENTRY);
    CHECK_STATUS(new_agent(unterminated, &a), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_messages_json(a, &m), TOOLOOP_OK);
    CHECK_CONTAINS(m, "kept without newline");
    tooloop_string_free(m);
    CHECK_STATUS(tooloop_agent_run(a, "more", NULL, NULL, NULL), TOOLOOP_OK);
    tooloop_agent_free(a);
    CHECK_STATUS(new_agent(unterminated, &a), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_messages_json(a, &m), TOOLOOP_OK);
    CHECK_CONTAINS(m, "kept without newline");
    CHECK_CONTAINS(m, "\"text\":\"more\"");
    CHECK_CONTAINS(m, "\"text\":\"ok\"");
    tooloop_string_free(m);
    tooloop_agent_free(a);

    /* 5. Created owner-only. */
    CHECK_STATUS(new_agent(created, &a), TOOLOOP_OK);
    tooloop_agent_free(a);
    CHECK(stat(created, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);

    CHECK(unlink(notes) == 0);
    CHECK(unlink(newer) == 0);
    CHECK(unlink(held) == 0);
    CHECK(unlink(unterminated) == 0);
    CHECK(unlink(created) == 0);
    CHECK(rmdir(sub) == 0);
    CHECK(rmdir(dir) == 0); /* fails if a temporary file was left behind */
    return check_exit("session_files");
}
