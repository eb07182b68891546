/* Minimal checks for the C and C++ test programs of tests/c: each failed check prints where and why, and
 * check_exit() turns the count into the exit status the runner reads. Include after tooloop.h. */
#ifndef TOOLOOP_TEST_CHECK_H
#define TOOLOOP_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures = 0;

/* The whole of the file at `path` as a NUL-terminated string (malloc'd: free it), or NULL when it cannot be
 * read. For `--requests FILE` checks of what the mock server recorded. */
static inline char *check_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long size;
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = size < 0 ? NULL : (char *)malloc((size_t)size + 1);
    if (buf != NULL) buf[fread(buf, 1, (size_t)size, f)] = '\0';
    fclose(f);
    return buf;
}

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);    \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

/* Run `call`, expect status `want`; on a mismatch print both codes and the last error. */
#define CHECK_STATUS(call, want)                                                                         \
    do {                                                                                                 \
        tooloop_status got_ = (call);                                                                    \
        if (got_ != (want)) {                                                                            \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s); last error: %s\n", __FILE__, \
                    __LINE__, #call, (int)got_, tooloop_status_str(got_), (int)(want),                   \
                    tooloop_status_str(want), tooloop_last_error());                                     \
            check_failures++;                                                                            \
        }                                                                                                \
    } while (0)

#define CHECK_CONTAINS(haystack, needle)                                                          \
    do {                                                                                          \
        const char *h_ = (haystack);                                                              \
        if (h_ == NULL || strstr(h_, (needle)) == NULL) {                                         \
            fprintf(stderr, "%s:%d: expected %s to contain \"%s\"; it is: %s\n", __FILE__, __LINE__, \
                    #haystack, (needle), h_ ? h_ : "(NULL)");                                      \
            check_failures++;                                                                     \
        }                                                                                         \
    } while (0)

#define CHECK_NOT_CONTAINS(haystack, needle)                                                          \
    do {                                                                                              \
        const char *h_ = (haystack);                                                                  \
        if (h_ != NULL && strstr(h_, (needle)) != NULL) {                                             \
            fprintf(stderr, "%s:%d: expected %s not to contain \"%s\"; it is: %s\n", __FILE__, __LINE__, \
                    #haystack, (needle), h_);                                                          \
            check_failures++;                                                                         \
        }                                                                                             \
    } while (0)

/* The last error must mention `needle` (call right after the failing call). */
#define CHECK_LAST_ERROR(needle) CHECK_CONTAINS(tooloop_last_error(), needle)

static inline int check_exit(const char *program) {
    if (check_failures != 0) {
        fprintf(stderr, "%s: %d check(s) failed\n", program, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", program);
    return 0;
}

/* The environment variable `name`, or exit with a message when the mock server did not set it. */
static inline const char *require_env(const char *name) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') {
        fprintf(stderr, "%s is not set: run this program under tests/mock/mockctl.py run SCENARIO -- PROGRAM\n", name);
        exit(2);
    }
    return v;
}

#endif
