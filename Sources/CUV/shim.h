// libuv plus the few Linux bits Swift cannot see directly (netlink, renameat2, sync_file_range,
// malloc_trim).
#ifndef AFT_CUV_SHIM_H
#define AFT_CUV_SHIM_H
#include <uv.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <malloc.h>

/// The file descriptor behind a uv stream/pipe handle, or -1.
static inline int aft_handle_fd(uv_handle_t *h) {
    uv_os_fd_t fd;
    if (uv_fileno(h, &fd) != 0) return -1;
    return (int)fd;
}

static inline size_t aft_sizeof_loop(void) { return sizeof(uv_loop_t); }

/* Returns freed heap memory to the system (HeapTrimmer). */
static inline int aft_malloc_trim(void) { return malloc_trim(0); }
/// Starts the writeback of a file's dirty pages in [offset, offset+len) (len 0: to the end)
/// without waiting for it: sync_file_range(2) with SYNC_FILE_RANGE_WRITE, through syscall(2)
/// (the wrapper needs _GNU_SOURCE, which would clash with Glibc's module). 0 or -1 (errno set).
#include <sys/syscall.h>
static inline int aft_start_writeback(int fd, long long offset, long long len) {
    return (int)syscall(SYS_sync_file_range, fd, offset, len, 2 /* SYNC_FILE_RANGE_WRITE */);
}

/// Renames `from` to `to` unless `to` exists: renameat2(2) with RENAME_NOREPLACE, one atomic
/// call in place of a look and a rename, through syscall(2) (the wrapper needs _GNU_SOURCE).
/// A file system without the flag (EINVAL) gets a look (lstat) and a plain rename. 0 or -1
/// (errno set; EEXIST when `to` exists).
#include <fcntl.h>
#include <stdio.h>
#include <errno.h>
#include <sys/stat.h>
static inline int aft_rename_noreplace(const char *from, const char *to) {
    long rc = syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 1 /* RENAME_NOREPLACE */);
    if (rc == 0 || errno != EINVAL) return (int)rc;
    struct stat st;
    if (lstat(to, &st) == 0) { errno = EEXIST; return -1; }
    return rename(from, to);
}

/// Writes back every dirty file and inode of the file system holding `fd` and waits for it:
/// syncfs(2) through syscall(2) (the wrapper needs _GNU_SOURCE). Since Linux 5.8 it reports a
/// writeback error of that file system. 0 or -1 (errno set).
static inline int aft_syncfs(int fd) {
    return (int)syscall(SYS_syncfs, fd);
}

/// Marks every descriptor from `low` up close-on-exec, so a child started next (an `--on-end`
/// hook) inherits only its standard streams: libcurl's connections and wake-up pair and
/// descriptors the daemon itself inherited have no FD_CLOEXEC. close_range(2) with
/// CLOSE_RANGE_CLOEXEC (Linux 5.11) through syscall(2); on an older kernel, each descriptor
/// listed in /proc/self/fd. 0, or -1 (errno set).
#include <dirent.h>
#include <stdlib.h>
static inline int aft_cloexec_from(int low) {
    if (syscall(SYS_close_range, (unsigned)low, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) == 0) return 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd < low || fd == self) continue;
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
    closedir(d);
    return 0;
}

/// Moves the calling thread (only it) into the network namespace open at `fd` (setns(2) with
/// CLONE_NEWNET); 0, or -1 with errno set. Declared here because Swift's Glibc hides setns.
extern int setns(int fd, int nstype);
static inline int aft_setns_net(int fd) { return setns(fd, 0x40000000 /* CLONE_NEWNET */); }
#endif
