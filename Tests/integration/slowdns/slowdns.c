/* LD_PRELOAD shim for the tests: a name lookup of any host under ".slow-dns.test" hangs for
 * SLOWDNS_SECONDS (default 20) and then fails, as a resolver whose server never answers does;
 * every other lookup goes to the C library. No namespace, mount or DNS server needed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    static const char suffix[] = ".slow-dns.test";
    size_t n = node ? strlen(node) : 0, s = sizeof(suffix) - 1;
    if (n > s && strcmp(node + n - s, suffix) == 0) {
        const char *env = getenv("SLOWDNS_SECONDS");
        sleep(env ? (unsigned)atoi(env) : 20);
        return EAI_AGAIN;
    }
    getaddrinfo_fn real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    return real(node, service, hints, res);
}
