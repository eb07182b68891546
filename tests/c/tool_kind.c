/* A C tool that writes a file, marked TOOLOOP_TOOL_KIND_WRITE with its path field (tooloop_agent_set_tool_kind):
 * its call is followed by a TOOLOOP_EVENT_FILE_CHANGE event with what the file held before, as write_file's is,
 * and tooloop_restore_file undoes the change from it (tests/scenarios/c_tool_kind.json). A kind that does not fit
 * the tool is refused. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char ws[64];
static int changes = 0;

static void write_text(const char *path, const char *content) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f == NULL) return;
    CHECK(fputs(content, f) >= 0);
    CHECK(fclose(f) == 0);
}

static int has_text(const char *path, const char *want) {
    char buf[64] = {0};
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n == strlen(want) && memcmp(buf, want, n) == 0;
}

/* save_note({"target": "note.txt", "text": "new\n"}): the scenario's one call, so the input is known. */
static int32_t save_note(void *userdata, const char *input_json, tooloop_tool_result *result) {
    char path[128];
    (void)userdata;
    CHECK_CONTAINS(input_json, "\"target\":\"note.txt\"");
    snprintf(path, sizeof path, "%s/note.txt", ws);
    write_text(path, "new\n");
    CHECK_STATUS(tooloop_tool_result_set_text(result, "saved note.txt"), TOOLOOP_OK);
    return 0;
}

static void on_event(void *userdata, const tooloop_event *event) {
    (void)userdata;
    if (event->type != TOOLOOP_EVENT_FILE_CHANGE) return;
    changes++;
    CHECK_CONTAINS(event->json, "\"name\":\"save_note\"");
    CHECK_CONTAINS(event->json, "\"path\":\"note.txt\"");
    CHECK_CONTAINS(event->json, "\"kind\":\"modified\"");
    CHECK_CONTAINS(event->json, "\"before\":\"old\\n\"");
}

static const char *SCHEMA =
    "{\"type\": \"object\", \"properties\": {\"target\": {\"type\": \"string\"}, \"text\": {\"type\": \"string\"},"
    " \"count\": {\"type\": \"integer\"}}, \"required\": [\"target\", \"text\"]}";

int main(void) {
    char base[] = "/tmp/tooloop-c-kind-XXXXXX";
    char note[128], config[256];
    tooloop_agent *agent = NULL;
    char *result = NULL;

    require_env("TOOLOOP_MOCK_URL");
    CHECK(mkdtemp(base) != NULL);
    snprintf(ws, sizeof ws, "%s", base);
    snprintf(note, sizeof note, "%s/note.txt", ws);
    snprintf(config, sizeof config, "{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"workspace\": \"%s\"}", ws);
    write_text(note, "old\n");

    CHECK_STATUS(tooloop_agent_new(config, &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("tool_kind");
    CHECK_STATUS(tooloop_agent_add_tool(agent, "save_note", "Save a note.", SCHEMA, save_note, NULL, NULL), TOOLOOP_OK);

    /* What does not fit is refused, and the tool stays as it was. */
    CHECK_STATUS(tooloop_agent_set_tool_kind(agent, "save_note", 9, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("unknown tool kind 9");
    CHECK_STATUS(tooloop_agent_set_tool_kind(agent, "save_note", TOOLOOP_TOOL_KIND_WRITE, NULL),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("needs path_field");
    CHECK_STATUS(tooloop_agent_set_tool_kind(agent, "save_note", TOOLOOP_TOOL_KIND_WRITE, "count"),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("must be a string property");
    CHECK_STATUS(tooloop_agent_set_tool_kind(agent, "save_note", TOOLOOP_TOOL_KIND_READ, "target"),
                 TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("path_field is for kind \"write\" only");
    CHECK_STATUS(tooloop_agent_set_tool_kind(agent, "nope", TOOLOOP_TOOL_KIND_READ, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_STATUS(tooloop_agent_set_tool_kind(NULL, "save_note", TOOLOOP_TOOL_KIND_READ, NULL),
                 TOOLOOP_INVALID_ARGUMENT);

    CHECK_STATUS(tooloop_agent_set_tool_kind(agent, "save_note", TOOLOOP_TOOL_KIND_WRITE, "target"), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_run(agent, "save the note", on_event, NULL, &result), TOOLOOP_OK);
    CHECK(changes == 1);
    CHECK(has_text(note, "new\n"));
    tooloop_string_free(result);
    tooloop_agent_free(agent);

    /* Undo from what the event said: the content before, back in place. */
    const uint8_t old[] = {'o', 'l', 'd', '\n'};
    CHECK_STATUS(tooloop_restore_file(ws, "note.txt", old, sizeof old, 0644), TOOLOOP_OK);
    CHECK(has_text(note, "old\n"));

    CHECK(unlink(note) == 0);
    CHECK(rmdir(ws) == 0);
    return check_exit("tool_kind");
}
