#ifndef AFT_COPENSSL_SHIM_H
#define AFT_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <unistd.h>
#include <errno.h>

/// Adds bytes [start, end) of `fd` to `ctx` (pread in 1 MiB chunks). Runs on libuv's pool, so it
/// touches nothing but its arguments. Returns 0, or -1 on a read error or a short file.
static inline int aft_sha256_update_fd(EVP_MD_CTX *ctx, int fd, long long start, long long end) {
    const size_t chunk = 1 << 20;
    unsigned char *buf = malloc(chunk);
    if (buf == NULL) return -1;
    long long off = start;
    int rc = 0;
    while (off < end) {
        size_t want = (size_t)((end - off) < (long long)chunk ? (end - off) : (long long)chunk);
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { rc = -1; break; }
        EVP_DigestUpdate(ctx, buf, (size_t)n);
        off += n;
    }
    free(buf);
    return rc;
}
#endif
