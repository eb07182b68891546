/* Compaction, token counting and the context window (tests/scenarios/c_compaction.json; the mock server's
 * context simulation answers count_tokens and rewrites usage, and its routes answer the summary requests).
 *
 * Agent A reads three large pages with a C tool, then:
 *   - tooloop_agent_compact whose summary request hangs (a slow route) is cancelled from another thread:
 *     TOOLOOP_CANCELLED, the conversation untouched;
 *   - tooloop_agent_compact with instructions: the record has "method":"summary" and the route's summary;
 *     the API view is shorter and starts with the first user message, then the summary; the history keeps
 *     every entry; the next run's request carries the summary (checked afterwards, see below);
 *   - count_tokens is positive and grows with input; context_window is the configured one.
 * Agent B (context_window 4096, compact_threshold 0.5) compacts by itself mid-run:
 * TOOLOOP_EVENT_COMPACTION reaches the event callback. Then bad arguments, and context_window from the model
 * table.
 *
 * tests/c/run.sh runs this program under the mock server with --requests-out FILE, then again as
 * `compaction --requests FILE` to check the requests the server recorded. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <pthread.h>
#include <time.h>

#include "check.h"
#include "workers.h"

#define SUMMARY "SUMMARY-CC: the user asked to read three pages; page 1 was about apples, page 2 about pears."
#define FIRST_INPUT "Read pages 1, 2 and 3."

static int page_calls;
static tooloop_agent *agent_a;

/* read_page: a marker line, then about 5000 bytes of filler. */
static int32_t read_page(void *userdata, const char *input_json, tooloop_tool_result *result) {
    char *page = NULL;
    char text[6000];
    size_t len;
    (void)userdata;
    page_calls++;
    CHECK_STATUS(tooloop_json_get(input_json, "/page", &page), TOOLOOP_OK);
    len = (size_t)snprintf(text, sizeof text, "PAGE-%s-CONTENT\n", page ? page : "?");
    while (len + 40 < 5000) len += (size_t)snprintf(text + len, sizeof text - len, "line %04u of the page text.\n", (unsigned)len);
    tooloop_string_free(page);
    if (page_calls == 1 && agent_a != NULL) {
        /* Inside a run: compacting is refused (one thing at a time), counting and reading are not. */
        char *record = (char *)"untouched";
        uint64_t tokens = 0, window = 0;
        CHECK_STATUS(tooloop_agent_compact(agent_a, NULL, &record), TOOLOOP_BUSY);
        CHECK_LAST_ERROR("tooloop_agent_compact: a run is in progress");
        CHECK(strcmp(record, "untouched") == 0);
        CHECK_STATUS(tooloop_agent_count_tokens(agent_a, NULL, &tokens), TOOLOOP_OK);
        CHECK(tokens > 0);
        CHECK_STATUS(tooloop_agent_context_window(agent_a, &window), TOOLOOP_OK);
        CHECK(window == 8000);
    }
    return tooloop_tool_result_set_text(result, text) == TOOLOOP_OK ? 0 : 1;
}

typedef struct {
    int compactions;
    int threshold_compactions;
    int tool_results;
    int tool_results_at_first_compaction;
} event_counts;

static void on_event(void *userdata, const tooloop_event *ev) {
    event_counts *c = (event_counts *)userdata;
    if (ev->type == TOOLOOP_EVENT_TOOL_RESULT) c->tool_results++;
    if (ev->type != TOOLOOP_EVENT_COMPACTION) return;
    if (c->compactions++ == 0) c->tool_results_at_first_compaction = c->tool_results;
    CHECK(ev->text == NULL);
    CHECK_CONTAINS(ev->json, "{\"type\":\"compaction\",\"reason\":\"threshold\",\"method\":\"");
    CHECK_CONTAINS(ev->json, "\"tokens_before\":");
    if (strstr(ev->json, "\"reason\":\"threshold\"") != NULL) c->threshold_compactions++;
    printf("compaction: event %s\n", ev->json);
}

/* Cancels agent_a again and again until the main thread says stop (a cancel lands only on a call in
 * progress, so repeating it catches the compaction whenever it begins). */
typedef struct {
    pthread_mutex_t lock;
    int stop;
    int cancels;
} canceller_state;

static void *canceller(void *arg) {
    canceller_state *st = (canceller_state *)arg;
    struct timespec pause = {0, 50 * 1000 * 1000};
    for (;;) {
        int stop;
        pthread_mutex_lock(&st->lock);
        stop = st->stop;
        pthread_mutex_unlock(&st->lock);
        if (stop) break;
        nanosleep(&pause, NULL);
        CHECK_STATUS(tooloop_agent_cancel(agent_a), TOOLOOP_OK);
        st->cancels++;
    }
    return NULL;
}

static char *messages_of(const tooloop_agent *agent) {
    char *m = NULL;
    CHECK_STATUS(tooloop_agent_messages_json(agent, &m), TOOLOOP_OK);
    return m;
}

/* How many elements a JSON array has (read with tooloop_json_get). */
static int array_length(const char *json) {
    int n = 0;
    for (;;) {
        char pointer[32], *v = NULL;
        snprintf(pointer, sizeof pointer, "/%d", n);
        if (tooloop_json_get(json, pointer, &v) != TOOLOOP_OK) return n;
        tooloop_string_free(v);
        n++;
    }
}

/* The text at `pointer` in `json` (caller frees), or NULL. */
static char *get(const char *json, const char *pointer) {
    char *v = NULL;
    if (tooloop_json_get(json, pointer, &v) != TOOLOOP_OK) return NULL;
    return v;
}

static void bad_arguments(tooloop_agent *a) {
    char *out = (char *)"untouched";
    uint64_t tokens = 12345;
    const char bad_utf8[] = {'a', (char)0xff, 'b', 0};

    CHECK_STATUS(tooloop_agent_compact(NULL, NULL, &out), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_compact: agent is NULL");
    CHECK_STATUS(tooloop_agent_compact(a, NULL, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_compact: out_json is NULL");
    CHECK_STATUS(tooloop_agent_compact(a, bad_utf8, &out), TOOLOOP_INVALID_UTF8);
    CHECK_LAST_ERROR("tooloop_agent_compact: instructions is not valid UTF-8 (the first invalid byte is at offset 1)");
    CHECK(strcmp(out, "untouched") == 0);

    CHECK_STATUS(tooloop_agent_count_tokens(NULL, NULL, &tokens), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_count_tokens: agent is NULL");
    CHECK_STATUS(tooloop_agent_count_tokens(a, NULL, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_count_tokens: out_tokens is NULL");
    CHECK_STATUS(tooloop_agent_count_tokens(a, bad_utf8, &tokens), TOOLOOP_INVALID_UTF8);
    CHECK_LAST_ERROR("tooloop_agent_count_tokens: input is not valid UTF-8");

    CHECK_STATUS(tooloop_agent_context_window(NULL, &tokens), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_context_window: agent is NULL");
    CHECK_STATUS(tooloop_agent_context_window(a, NULL), TOOLOOP_INVALID_ARGUMENT);
    CHECK_LAST_ERROR("tooloop_agent_context_window: out_tokens is NULL");
    CHECK(tokens == 12345); /* outputs are not written on failure */

    /* The config keys are checked by the core's options. */
    {
        tooloop_agent *x = NULL;
        CHECK_STATUS(tooloop_agent_new("{\"model\": \"m\", \"compaction\": \"sometimes\"}", &x), TOOLOOP_INVALID_ARGUMENT);
        CHECK_LAST_ERROR("\"compaction\"");
        CHECK_STATUS(tooloop_agent_new("{\"model\": \"m\", \"compact_threshold\": 7}", &x), TOOLOOP_INVALID_ARGUMENT);
        CHECK_LAST_ERROR("\"compact_threshold\"");
        CHECK(x == NULL);
    }
}

static int run_agents(void) {
    tooloop_agent *b = NULL, *c = NULL;
    char *result = NULL, *record = NULL, *before = NULL, *after = NULL, *history = NULL, *v = NULL;
    uint64_t tokens = 0, tokens_more = 0, window = 0;
    event_counts counts;
    canceller_state cst;
    pthread_t thread;
    tooloop_status status;
    int n_before, n_after, n_history_before, n_history_after;

    require_env("TOOLOOP_MOCK_URL");

    /* ---- Agent A: three large tool results. ---- */
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"context_window\": 8000, "
                                   "\"compaction\": \"off\", \"compaction_model\": \"claude-haiku-4-5\"}",
                                   &agent_a),
                 TOOLOOP_OK);
    if (agent_a == NULL) return check_exit("compaction");
    CHECK_STATUS(tooloop_agent_add_tool(agent_a, "read_page", "Read a page.",
                                        "{\"properties\": {\"page\": {\"type\": \"integer\"}}, \"required\": [\"page\"]}",
                                        read_page, NULL, NULL),
                 TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_context_window(agent_a, &window), TOOLOOP_OK);
    CHECK(window == 8000);
    /* Nothing to compact yet: the JSON null. */
    CHECK_STATUS(tooloop_agent_compact(agent_a, NULL, &record), TOOLOOP_OK);
    CHECK(record != NULL && strcmp(record, "null") == 0);
    tooloop_string_free(record);
    record = NULL;

    memset(&counts, 0, sizeof counts);
    CHECK_STATUS(tooloop_agent_run(agent_a, FIRST_INPUT, on_event, &counts, &result), TOOLOOP_OK);
    CHECK(page_calls == 3);
    CHECK(counts.compactions == 0); /* "compaction": "off" */
    v = get(result, "/text");
    CHECK(v != NULL && strcmp(v, "I have read the three pages.") == 0);
    tooloop_string_free(v);
    tooloop_string_free(result);
    result = NULL;

    before = messages_of(agent_a);
    n_before = array_length(before);
    CHECK(n_before == 8); /* user, 3 x (assistant tool_use, user tool_result), assistant text */
    CHECK_STATUS(tooloop_agent_history_json(agent_a, &history), TOOLOOP_OK);
    n_history_before = array_length(history);
    tooloop_string_free(history);

    /* Token counting: the API's count (the mock answers count_tokens with its estimate). */
    CHECK_STATUS(tooloop_agent_count_tokens(agent_a, NULL, &tokens), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_count_tokens(agent_a, "And one more question about the pages, please.", &tokens_more),
                 TOOLOOP_OK);
    printf("compaction: count_tokens %llu, with input %llu\n", (unsigned long long)tokens,
           (unsigned long long)tokens_more);
    CHECK(tokens > 3000); /* three pages of ~5000 bytes at 4 bytes a token */
    CHECK(tokens_more > tokens);

    /* 1. A compaction cancelled from another thread while its summary request hangs: the conversation is
     *    as it was. */
    memset(&cst, 0, sizeof cst);
    pthread_mutex_init(&cst.lock, NULL);
    CHECK(pthread_create(&thread, NULL, canceller, &cst) == 0);
    record = (char *)"untouched";
    status = tooloop_agent_compact(agent_a, "CANCEL-ME", &record);
    pthread_mutex_lock(&cst.lock);
    cst.stop = 1;
    pthread_mutex_unlock(&cst.lock);
    CHECK(pthread_join(thread, NULL) == 0);
    pthread_mutex_destroy(&cst.lock);
    CHECK(status == TOOLOOP_CANCELLED);
    CHECK_LAST_ERROR("tooloop_agent_compact: cancelled");
    CHECK(strcmp(record, "untouched") == 0);
    record = NULL;
    after = messages_of(agent_a);
    CHECK(after != NULL && before != NULL && strcmp(after, before) == 0);
    tooloop_string_free(after);
    after = NULL;

    /* 2. Compact with instructions: the route's summary replaces the older turns. */
    CHECK_STATUS(tooloop_agent_compact(agent_a, "Keep the page titles.", &record), TOOLOOP_OK);
    printf("compaction: record %s\n", record ? record : "(NULL)");
    CHECK_CONTAINS(record, "\"reason\":\"manual\"");
    CHECK_CONTAINS(record, "\"method\":\"summary\"");
    CHECK_CONTAINS(record, "\"instructions\":\"Keep the page titles.\"");
    v = get(record, "/summary");
    CHECK(v != NULL && strcmp(v, SUMMARY) == 0);
    tooloop_string_free(v);
    v = get(record, "/removed/0");
    CHECK(v != NULL);
    tooloop_string_free(v);
    CHECK_NOT_CONTAINS(record, "fallback_reason");
    tooloop_string_free(record);
    record = NULL;

    after = messages_of(agent_a);
    n_after = array_length(after);
    printf("compaction: messages %d -> %d\n", n_before, n_after);
    CHECK(n_after < n_before);
    CHECK(strlen(after) < strlen(before));
    /* The first user message, then the summary (in the same user turn: roles alternate). */
    v = get(after, "/0/role");
    CHECK(v != NULL && strcmp(v, "user") == 0);
    tooloop_string_free(v);
    v = get(after, "/0/content/0/text");
    CHECK(v != NULL && strcmp(v, FIRST_INPUT) == 0);
    tooloop_string_free(v);
    v = get(after, "/0/content/1/text");
    CHECK_CONTAINS(v, "[Summary of the earlier conversation.");
    CHECK_CONTAINS(v, SUMMARY);
    tooloop_string_free(v);
    CHECK_NOT_CONTAINS(after, "PAGE-1-CONTENT");
    /* Asked by hand, at most a quarter of the conversation stays verbatim: here the newest turn, the answer
     * (page 3's long result went into the summary). */
    CHECK_CONTAINS(after, "I have read the three pages.");
    CHECK_NOT_CONTAINS(after, "PAGE-3-CONTENT");
    /* The history keeps every entry, plus the compaction record. */
    CHECK_STATUS(tooloop_agent_history_json(agent_a, &history), TOOLOOP_OK);
    n_history_after = array_length(history);
    CHECK(n_history_after == n_history_before + 1);
    CHECK_CONTAINS(history, "PAGE-1-CONTENT");
    CHECK_CONTAINS(history, "PAGE-2-CONTENT");
    CHECK_CONTAINS(history, "\"role\":\"system\"");
    CHECK_CONTAINS(history, SUMMARY);
    tooloop_string_free(history);
    tooloop_string_free(before);
    tooloop_string_free(after);

    /* Fewer tokens now. */
    CHECK_STATUS(tooloop_agent_count_tokens(agent_a, NULL, &tokens_more), TOOLOOP_OK);
    printf("compaction: count_tokens after compaction %llu\n", (unsigned long long)tokens_more);
    CHECK(tokens_more > 0 && tokens_more < tokens);

    /* 3. The run goes on from the compacted view (the request is checked in --requests mode). */
    CHECK_STATUS(tooloop_agent_run(agent_a, "What was on page 1?", NULL, NULL, &result), TOOLOOP_OK);
    v = get(result, "/text");
    CHECK(v != NULL && strcmp(v, "Page 1 was about apples.") == 0);
    tooloop_string_free(v);
    tooloop_string_free(result);
    result = NULL;

    /* ---- Agent B: a small window; the run compacts by itself. Each page is cut to what a turn's results may
     *      take (a quarter of the window, about 2,900 of its 5,000 bytes), so three pages, and a threshold the
     *      third crosses. ---- */
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-sonnet-4-6\", \"max_retries\": 0, \"context_window\": 4096, "
                                   "\"compact_threshold\": 0.4}",
                                   &b),
                 TOOLOOP_OK);
    if (b != NULL) {
        CHECK_STATUS(tooloop_agent_add_tool(b, "read_page", "Read a page.",
                                            "{\"properties\": {\"page\": {\"type\": \"integer\"}}}", read_page, NULL, NULL),
                     TOOLOOP_OK);
        memset(&counts, 0, sizeof counts);
        CHECK_STATUS(tooloop_agent_run(b, "Read pages 4, 5 and 6.", on_event, &counts, &result), TOOLOOP_OK);
        printf("compaction: agent B compacted %d time(s), the first after %d tool result(s)\n", counts.compactions,
               counts.tool_results_at_first_compaction);
        CHECK(counts.compactions >= 1);
        CHECK(counts.threshold_compactions == counts.compactions);
        CHECK(counts.tool_results_at_first_compaction >= 1);
        v = get(result, "/text");
        CHECK(v != NULL && strcmp(v, "Pages 4 to 6 are read.") == 0);
        tooloop_string_free(v);
        tooloop_string_free(result);
        CHECK_STATUS(tooloop_agent_history_json(b, &history), TOOLOOP_OK);
        CHECK_CONTAINS(history, "\"compaction\":{\"reason\":\"threshold\",\"method\":\"clear_tool_results\"");
        tooloop_string_free(history);
        /* The API view: the first page's output replaced by a note. */
        history = messages_of(b);
        CHECK_CONTAINS(history, "[output of read_page cleared to save context: ");
        CHECK_NOT_CONTAINS(history, "PAGE-4-CONTENT");
        CHECK_CONTAINS(history, "PAGE-6-CONTENT");
        tooloop_string_free(history);
        CHECK_STATUS(tooloop_agent_context_window(b, &window), TOOLOOP_OK);
        CHECK(window == 4096);
        bad_arguments(b);
        tooloop_agent_free(b);
    }

    /* ---- The context window from the model's name. ---- */
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"claude-opus-4-1\"}", &c), TOOLOOP_OK);
    CHECK_STATUS(tooloop_agent_context_window(c, &window), TOOLOOP_OK);
    CHECK(window == 200000);
    tooloop_agent_free(c);
    c = NULL;
    CHECK_STATUS(tooloop_agent_new("{\"model\": \"my-local-model\", \"provider\": \"openai\"}", &c), TOOLOOP_OK);
    window = 1;
    CHECK_STATUS(tooloop_agent_context_window(c, &window), TOOLOOP_OK);
    CHECK(window == 0); /* unknown */
    /* No counting endpoint on this provider: an estimate, without a request. */
    CHECK_STATUS(tooloop_agent_count_tokens(c, "Hello there, how many tokens is this?", &tokens), TOOLOOP_OK);
    CHECK(tokens > 0 && tokens < 100);
    tooloop_agent_free(c);

    tooloop_agent_free(agent_a);
    /* The cancelled summary request's worker ends when the slow route finally answers (3 s). */
    CHECK(wait_http_workers(10.0) == 0);
    return check_exit("compaction");
}

/* ---- --requests FILE: the requests the mock server recorded (mockctl --requests-out). ---- */

static int check_requests(const char *path) {
    char *all = check_read_file(path);
    int n, i, summary_requests = 0, count_requests = 0, followups = 0, cancelled_summaries = 0;
    if (all == NULL) {
        fprintf(stderr, "compaction: cannot read %s\n", path);
        return 1;
    }
    n = array_length(all);
    CHECK(n > 10);
    for (i = 0; i < n; i++) {
        char pointer[64];
        char *req_path, *body, *route;
        snprintf(pointer, sizeof pointer, "/%d/path", i);
        req_path = get(all, pointer);
        snprintf(pointer, sizeof pointer, "/%d/raw_body", i);
        body = get(all, pointer);
        snprintf(pointer, sizeof pointer, "/%d/route", i);
        route = get(all, pointer);
        snprintf(pointer, sizeof pointer, "/%d/rejected", i);
        {
            char *rejected = get(all, pointer);
            CHECK(rejected == NULL); /* nothing went over the server's context limit */
            tooloop_string_free(rejected);
        }
        if (req_path != NULL && strcmp(req_path, "/v1/messages/count_tokens") == 0) count_requests++;
        if (route != NULL && strcmp(route, "0") == 0) cancelled_summaries++;
        if (route != NULL && strcmp(route, "1") == 0 && body != NULL && strstr(body, "Keep the page titles.") != NULL) {
            /* The manual summary request: the older turns as a transcript, the instructions, the summary
             * model. */
            summary_requests++;
            CHECK_CONTAINS(body, "<transcript>");
            CHECK_CONTAINS(body, "PAGE-1-CONTENT");
            CHECK_CONTAINS(body, "PAGE-3-CONTENT");
            CHECK_CONTAINS(body, "Instructions for this summary: Keep the page titles.");
            CHECK_CONTAINS(body, "\"model\":\"claude-haiku-4-5\"");
        }
        if (route == NULL && body != NULL && strstr(body, "What was on page 1?") != NULL) {
            /* The run after the compaction sends the compacted view: the summary, not the old pages. */
            followups++;
            CHECK_CONTAINS(body, "SUMMARY-CC: the user asked to read three pages");
            CHECK_CONTAINS(body, FIRST_INPUT);
            CHECK_NOT_CONTAINS(body, "PAGE-1-CONTENT");
            CHECK_CONTAINS(body, "I have read the three pages.");
        }
        tooloop_string_free(req_path);
        tooloop_string_free(body);
        tooloop_string_free(route);
    }
    CHECK(summary_requests == 1);
    /* The cancelled compaction's summary request reached the slow route, unless the cancel came first. */
    CHECK(cancelled_summaries <= 1);
    CHECK(followups == 1);
    CHECK(count_requests >= 3);
    free(all);
    return check_exit("compaction --requests");
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--requests") == 0) return check_requests(argv[2]);
    return run_agents();
}
