/* tooloop_restore_file: a C host's undo puts a workspace file back through the library's
 * race-free handles. A symlink planted where a naive undo would write its temporary file is never written
 * through; a path leading out is TOOLOOP_IO with the file outside untouched; NULL content removes. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

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

int main(void) {
    char base[] = "/tmp/tooloop-c-restore-XXXXXX";
    CHECK(mkdtemp(base) != NULL);
    char ws[64], outside[64], victim[128], target[128], planted[128], link_dir[128], out_path[256];
    snprintf(ws, sizeof ws, "%s/ws", base);
    snprintf(outside, sizeof outside, "%s/outside", base);
    snprintf(victim, sizeof victim, "%s/bashrc", outside);
    snprintf(target, sizeof target, "%s/a.txt", ws);
    snprintf(planted, sizeof planted, "%s/.a.txt.tooloop-undo.tmp", ws);
    snprintf(link_dir, sizeof link_dir, "%s/out", ws);
    snprintf(out_path, sizeof out_path, "%s/bashrc", link_dir);
    CHECK(mkdir(ws, 0700) == 0);
    CHECK(mkdir(outside, 0700) == 0);
    write_text(victim, "precious");
    CHECK(chmod(victim, 0600) == 0);
    write_text(target, "changed");
    CHECK(symlink(victim, planted) == 0);

    const uint8_t old[] = {'o', 'r', 'i', 'g'};
    CHECK_STATUS(tooloop_restore_file(ws, "a.txt", old, sizeof old, 0755), TOOLOOP_OK);
    CHECK(has_text(target, "orig"));
    struct stat st;
    CHECK(lstat(target, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0755);
    CHECK(has_text(victim, "precious"));
    CHECK(stat(victim, &st) == 0 && (st.st_mode & 07777) == 0600);

    /* Out of the workspace, through a symlinked folder or by name: refused, nothing written. */
    CHECK(symlink(outside, link_dir) == 0);
    CHECK_STATUS(tooloop_restore_file(ws, "out/bashrc", old, sizeof old, 0777), TOOLOOP_IO);
    CHECK_CONTAINS(tooloop_last_error(), "outside");
    CHECK_STATUS(tooloop_restore_file(ws, victim, NULL, 0, 0), TOOLOOP_IO);
    CHECK(has_text(victim, "precious"));
    CHECK_STATUS(tooloop_restore_file(ws, NULL, old, sizeof old, 0644), TOOLOOP_INVALID_ARGUMENT);

    /* NULL content: the file did not exist before, so it goes. */
    CHECK_STATUS(tooloop_restore_file(ws, "a.txt", NULL, 0, 0), TOOLOOP_OK);
    CHECK(access(target, F_OK) != 0);

    CHECK(unlink(planted) == 0);
    CHECK(unlink(link_dir) == 0);
    CHECK(unlink(victim) == 0);
    CHECK(rmdir(outside) == 0);
    CHECK(rmdir(ws) == 0); /* fails if a temporary file was left behind */
    CHECK(rmdir(base) == 0);
    return check_exit("restore_file");
}
