/* HTTP worker threads of libtooloop (named "tooloop-http") as seen in /proc/self/task (Linux).
 *
 * Why the tests look at them: a blocking socket read cannot be interrupted, so after a cancel the worker of
 * that request stays blocked until the server's next bytes (or close), then exits; a completed request's
 * worker exits right after handing over the end of the body. A process that exits in that window shows the
 * thread's TLS block (288 bytes, from pthread_create) as "possibly lost" under valgrind. The tests wait for
 * the workers to end before exiting, and fail if one does not: a worker that never ends would be a thread
 * leak. Needs _POSIX_C_SOURCE >= 200809L (or C++). */
#ifndef TOOLOOP_TEST_WORKERS_H
#define TOOLOOP_TEST_WORKERS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static inline int http_worker_count(void) {
    DIR *dir = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (dir == NULL) return 0;
    while ((e = readdir(dir)) != NULL) {
        char path[300], name[64];
        FILE *f;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        f = fopen(path, "r");
        if (f == NULL) continue;
        if (fgets(name, sizeof name, f) != NULL && strncmp(name, "tooloop-http", 12) == 0) n++;
        fclose(f);
    }
    closedir(dir);
    return n;
}

/* Wait up to max_seconds for every HTTP worker to end; returns how many are still running. */
static inline int wait_http_workers(double max_seconds) {
    struct timespec start, now, pause = {0, 5 * 1000 * 1000};
    int n;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while ((n = http_worker_count()) > 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 > max_seconds) break;
        nanosleep(&pause, NULL);
    }
    return n;
}

#endif
