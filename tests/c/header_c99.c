/* include/tooloop.h compiles on its own as C99 -pedantic -Wall -Wextra -Werror (it is the first and only
 * tooloop include of this file), and its basic promises hold: static strings are never NULL. */
#include "tooloop.h"

#include "check.h"

int main(void) {
    tooloop_status codes[] = {TOOLOOP_OK,           TOOLOOP_INVALID_ARGUMENT, TOOLOOP_INVALID_UTF8,
                              TOOLOOP_INVALID_JSON, TOOLOOP_DUPLICATE_TOOL,   TOOLOOP_BUSY,
                              TOOLOOP_CONFIG,       TOOLOOP_IO,               TOOLOOP_PANIC,
                              TOOLOOP_ERROR,        TOOLOOP_CANCELLED,        TOOLOOP_MAX_TURNS,
                              TOOLOOP_TOOL_ABORTED, TOOLOOP_MODEL_FAILED,     TOOLOOP_NO_VALUE,
                              TOOLOOP_API_ERROR,    TOOLOOP_BAD_REQUEST,      TOOLOOP_AUTHENTICATION,
                              TOOLOOP_PERMISSION_DENIED, TOOLOOP_NOT_FOUND,   TOOLOOP_REQUEST_TOO_LARGE,
                              TOOLOOP_RATE_LIMIT,   TOOLOOP_OVERLOADED,       TOOLOOP_INTERNAL_SERVER,
                              TOOLOOP_CONNECTION,   TOOLOOP_TIMEOUT,          TOOLOOP_STREAM_INTERRUPTED,
                              TOOLOOP_INVALID_RESPONSE};
    size_t i, j;
    /* Every code has its own text; an unknown code still gets a static string. */
    for (i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = tooloop_status_str(codes[i]);
        CHECK(s != NULL && *s != '\0');
        CHECK(strcmp(s, "unknown status") != 0);
        for (j = 0; j < i; j++) {
            CHECK(codes[i] != codes[j]);
            CHECK(strcmp(s, tooloop_status_str(codes[j])) != 0);
        }
    }
    CHECK(strcmp(tooloop_status_str(12345), "unknown status") == 0);
    CHECK(strcmp(tooloop_status_str(-1), "unknown status") == 0);
    CHECK(tooloop_version() != NULL && strchr(tooloop_version(), '.') != NULL);
    CHECK(tooloop_last_error() != NULL && *tooloop_last_error() == '\0');
    {
        /* The event struct has the documented fields and types. */
        tooloop_event ev;
        tooloop_event_type t = TOOLOOP_EVENT_TEXT;
        ev.type = t;
        ev.text = "hi";
        ev.json = "{}";
        CHECK(ev.type == 2 && ev.text[0] == 'h' && ev.json[0] == '{');
        /* Event codes are never renumbered. */
        CHECK(TOOLOOP_EVENT_SUBAGENT == 11 && TOOLOOP_EVENT_COMPACTION == 12 && TOOLOOP_EVENT_OTHER == 99);
        CHECK(TOOLOOP_EVENT_APPROVAL_REQUEST == 13 && TOOLOOP_EVENT_FILE_CHANGE == 14);
    }
    printf("tooloop %s\n", tooloop_version());
    return check_exit("header_c99");
}
