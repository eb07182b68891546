/* Sessions in SQLite through the C doors: the "session" config key and
 * tooloop_agent_open_session take "path.db#id" (the database and its folders created owner-only), a session
 * is resumed by id, a second writer of one session is refused while another id of the same database opens,
 * a database that is not tooloop's is refused untouched (TOOLOOP_IO), and a database path without an id is
 * a configuration error. No server: a host model answers. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <stdlib.h>
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

static tooloop_status new_agent(const char *session, tooloop_agent **out) {
    char config[512];
    if (session == NULL) return tooloop_agent_new_with_model("{}", ok_model, NULL, NULL, out);
    snprintf(config, sizeof config, "{\"session\": \"%s\"}", session);
    return tooloop_agent_new_with_model(config, ok_model, NULL, NULL, out);
}

int main(void) {
    tooloop_agent *a = NULL, *b = NULL, *c = NULL;
    char dir[] = "/tmp/tooloop-c-session-sqlite-XXXXXX";
    char db[256], runs[256], spec[300], other[300], notes[256], notes_spec[300], no_id[300], cmd[300];
    char *m = NULL;
    struct stat st;
    FILE *f;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(runs, sizeof runs, "%s/runs", dir);
    snprintf(db, sizeof db, "%s/runs/sessions.db", dir);
    snprintf(spec, sizeof spec, "%s#task-17", db);
    snprintf(other, sizeof other, "%s#task-18", db);
    snprintf(notes, sizeof notes, "%s/notes.db", dir);
    snprintf(notes_spec, sizeof notes_spec, "%s#x", notes);
    snprintf(no_id, sizeof no_id, "%s/plain.db", dir);

    /* 1. Created if new (owner-only), written as the run goes, resumed by id. */
    CHECK_STATUS(new_agent(spec, &a), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(a, "first", NULL, NULL, NULL), TOOLOOP_OK);
    CHECK(stat(db, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(stat(runs, &st) == 0 && (st.st_mode & 0777) == 0700);

    /* 2. One writer per session; another id of the same database opens at the same time. */
    CHECK_STATUS(new_agent(spec, &b), TOOLOOP_IO);
    CHECK_LAST_ERROR("is in use");
    CHECK(b == NULL);
    CHECK_STATUS(new_agent(NULL, &c), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_open_session(c, spec), TOOLOOP_IO);
    CHECK_LAST_ERROR("is in use");
    CHECK_STATUS(tooloop_agent_open_session(c, other), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(c, "other", NULL, NULL, NULL), TOOLOOP_OK);
    tooloop_agent_free(c);
    tooloop_agent_free(a);

    CHECK_STATUS(new_agent(spec, &a), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_messages_json(a, &m), TOOLOOP_OK);
    CHECK_CONTAINS(m, "\"text\":\"first\"");
    CHECK_CONTAINS(m, "\"text\":\"ok\"");
    CHECK(strstr(m, "\"text\":\"other\"") == NULL);
    tooloop_string_free(m);
    tooloop_agent_free(a);

    /* 3. Not a tooloop database: refused, untouched. */
    f = fopen(notes, "wb");
    CHECK(f != NULL);
    if (f != NULL) {
        CHECK(fputs("not a database\n", f) >= 0);
        CHECK(fclose(f) == 0);
    }
    CHECK_STATUS(new_agent(notes_spec, &a), TOOLOOP_IO);
    CHECK_LAST_ERROR("is not a tooloop session database");
    CHECK(stat(notes, &st) == 0 && st.st_size == 15);

    /* 4. A database path without "#id" is a configuration error (no JSONL file by that name appears). */
    CHECK_STATUS(new_agent(no_id, &a), TOOLOOP_CONFIG);
    CHECK_LAST_ERROR("no session id");
    CHECK(stat(no_id, &st) != 0);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_exit("session_sqlite");
}
