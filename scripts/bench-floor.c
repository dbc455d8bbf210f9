// bench-floor: the file work SPEC asks of each finished small download, and nothing else — a
// reference row for scripts/bench's `small` case (no network, no database, no events).
//
// usage: bench-floor SRC_DIR OUT_DIR N THREADS
// For each i < N, on THREADS threads: read SRC_DIR/f%06d.bin (the file nginx serves), create
// OUT_DIR/f%06d.bin.aftpart, write it, fdatasync, close, renameat2(RENAME_NOREPLACE) to
// OUT_DIR/f%06d.bin, then an fsync of OUT_DIR shared by every rename made while the last one ran
// (the group commit aftransferd does). Exit 0, or 1 with a message on the first failure.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *src;
static int n, src_fd, out_fd;
static atomic_int next_index;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long started, done;
static int syncing;

static void die(const char *what, int i) {
  fprintf(stderr, "bench-floor: %s of file %d: ", what, i);
  perror(NULL);
  exit(1);
}

// An fsync of the directory that starts after this call: share one under way only if it began
// after us, else wait for it and run (or share) the next.
static void sync_directory(int i) {
  pthread_mutex_lock(&mu);
  long target = started + (syncing ? 2 : 1);
  while (done < target) {
    if (!syncing) {
      syncing = 1;
      long generation = ++started;
      pthread_mutex_unlock(&mu);
      if (fsync(out_fd) != 0) die("directory fsync", i);
      pthread_mutex_lock(&mu);
      syncing = 0;
      done = generation;
      pthread_cond_broadcast(&cv);
    } else {
      pthread_cond_wait(&cv, &mu);
    }
  }
  pthread_mutex_unlock(&mu);
}

static void *work(void *unused) {
  (void)unused;
  static _Thread_local char buf[1 << 20];
  char name[64], part[80];
  int i;
  while ((i = atomic_fetch_add(&next_index, 1)) < n) {
    snprintf(name, sizeof name, "f%06d.bin", i);
    snprintf(part, sizeof part, "%s.aftpart", name);
    int in = openat(src_fd, name, O_RDONLY | O_CLOEXEC);
    if (in < 0) die("open source", i);
    ssize_t size = read(in, buf, sizeof buf);
    if (size < 0) die("read source", i);
    close(in);
    int fd = openat(out_fd, part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die("create part", i);
    if (write(fd, buf, (size_t)size) != size) die("write part", i);
    if (fdatasync(fd) != 0) die("fdatasync part", i);
    if (close(fd) != 0) die("close part", i);
    if (renameat2(out_fd, part, out_fd, name, RENAME_NOREPLACE) != 0) die("rename", i);
    sync_directory(i);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: bench-floor SRC_DIR OUT_DIR N THREADS\n");
    return 2;
  }
  src = argv[1];
  n = atoi(argv[3]);
  int threads = atoi(argv[4]);
  if (threads < 1 || threads > 64) threads = 16;
  src_fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  out_fd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (src_fd < 0 || out_fd < 0) die("open directory", -1);
  pthread_t t[64];
  for (int k = 0; k < threads; k++) pthread_create(&t[k], NULL, work, NULL);
  for (int k = 0; k < threads; k++) pthread_join(t[k], NULL);
  return 0;
}
