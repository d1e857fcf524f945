// An LD_PRELOAD library that logs the calls a durable write depends on
// (fsync, fdatasync and the renames), in the order they complete, to the
// file named by SACKLI_SYSCALL_LOG: one line per successful call,
// "call<TAB>path<TAB>second path". tests/core/syscall_trace.py builds and uses it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int log_fd = -1;

static void log_line(const char* call, const char* first, const char* second) {
  if (log_fd < 0) {
    const char* name = getenv("SACKLI_SYSCALL_LOG");
    if (name == NULL) return;
    log_fd = open(name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) return;
  }
  char line[3 * PATH_MAX + 64];
  int n = snprintf(line, sizeof line, "%s\t%s\t%s\n", call, first, second);
  if (n > (int)sizeof line) n = sizeof line;
  // One write to an O_APPEND file: lines of threads never interleave.
  if (write(log_fd, line, (size_t)n) < 0) return;
}

// The path an open descriptor names, or "" if it cannot be told.
static void path_of_fd(int fd, char* out) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, PATH_MAX - 1);
  out[n < 0 ? 0 : n] = '\0';
}

// A path relative to a directory descriptor, made absolute where it can be.
static void path_at(int dirfd, const char* path, char* out) {
  if (path[0] == '/' || dirfd == AT_FDCWD) {
    snprintf(out, PATH_MAX, "%s", path);
    return;
  }
  char folder[PATH_MAX];
  path_of_fd(dirfd, folder);
  snprintf(out, PATH_MAX, "%s/%s", folder, path);
}

// The next definition of `name` (libc's), looked up once.
#define REAL(name)                          \
  static __typeof__(&name) real = NULL;     \
  if (real == NULL) real = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

// Logs a successful sync of `fd` (fsync and fdatasync alike).
static int logged_sync(int (*real)(int), int fd) {
  int result = real(fd);
  int saved = errno;
  if (result == 0) {
    char path[PATH_MAX];
    path_of_fd(fd, path);
    log_line("fsync", path, "");
  }
  errno = saved;
  return result;
}

int fsync(int fd) {
  REAL(fsync);
  return logged_sync(real, fd);
}

int fdatasync(int fd) {
  REAL(fdatasync);
  return logged_sync(real, fd);
}

int rename(const char* from, const char* to) {
  REAL(rename);
  int result = real(from, to);
  int saved = errno;
  if (result == 0) log_line("rename", from, to);
  errno = saved;
  return result;
}

// Logs a successful rename between paths relative to directories.
static int logged_rename_at(int result, int from_dir, const char* from, int to_dir,
                            const char* to) {
  int saved = errno;
  if (result == 0) {
    char a[PATH_MAX], b[PATH_MAX];
    path_at(from_dir, from, a);
    path_at(to_dir, to, b);
    log_line("rename", a, b);
  }
  errno = saved;
  return result;
}

int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  REAL(renameat);
  return logged_rename_at(real(from_dir, from, to_dir, to), from_dir, from, to_dir, to);
}

int renameat2(int from_dir, const char* from, int to_dir, const char* to,
              unsigned int flags) {
  REAL(renameat2);
  return logged_rename_at(real(from_dir, from, to_dir, to, flags), from_dir, from, to_dir, to);
}
