#ifndef AFT_COPENSSL_SHIM_H
#define AFT_COPENSSL_SHIM_H
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
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
/// The PEM certificates in `data` (`len` bytes) that OpenSSL reads, as libcurl's `--cacert`
/// does: their count, or -1 when a `BEGIN CERTIFICATE` block cannot be read. Text outside the
/// blocks and other kinds of blocks are skipped. Leaves OpenSSL's error queue empty.
static inline int aft_pem_certificate_count(const void *data, int len) {
    BIO *bio = BIO_new_mem_buf(data, len);
    if (bio == NULL) return -1;
    int n = 0;
    for (;;) {
        X509 *x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        if (x == NULL) {
            unsigned long e = ERR_peek_last_error();
            int atEnd = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
            if (!atEnd) n = -1;
            break;
        }
        X509_free(x);
        n++;
    }
    ERR_clear_error();
    BIO_free(bio);
    return n;
}
#endif
