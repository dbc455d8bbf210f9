// Typed, non-variadic forwarders for libcurl's variadic API (Swift cannot call C variadics).
#ifndef AFT_CCURL_SHIM_H
#define AFT_CCURL_SHIM_H
#include <curl/curl.h>
#include <string.h>
#include <sys/socket.h>

typedef size_t (*aft_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*aft_curl_xferinfo_cb)(void *clientp, curl_off_t dltotal, curl_off_t dlnow,
                                    curl_off_t ultotal, curl_off_t ulnow);
typedef int (*aft_curl_socket_cb)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*aft_curl_timer_cb)(CURLM *multi, long timeout_ms, void *userp);
typedef int (*aft_curl_seek_cb)(void *userp, curl_off_t offset, int origin);
typedef int (*aft_curl_closesocket_cb)(void *clientp, curl_socket_t item);

static inline CURLcode aft_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode aft_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode aft_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode aft_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode aft_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode aft_easy_setopt_data_cb(CURL *h, CURLoption o, aft_curl_data_cb v) { return curl_easy_setopt(h, o, v); }
typedef int (*aft_curl_prereq_cb)(void *clientp, char *conn_primary_ip, char *conn_local_ip,
                                  int conn_primary_port, int conn_local_port);
static inline CURLcode aft_easy_setopt_prereq_cb(CURL *h, aft_curl_prereq_cb v) { return curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, v); }
static inline CURLcode aft_easy_setopt_xferinfo_cb(CURL *h, aft_curl_xferinfo_cb v) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, v); }
static inline CURLcode aft_easy_setopt_seek_cb(CURL *h, aft_curl_seek_cb v) { return curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, v); }
static inline CURLcode aft_easy_setopt_closesocket_cb(CURL *h, aft_curl_closesocket_cb v) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v); }

/// A CURLOPT_SOCKOPTFUNCTION that sets SO_LINGER to {on, 0} on each connection it makes: closing
/// the connection (an attempt stopped, the daemon stopped or killed) then resets it and drops the
/// bytes still queued in the kernel, rather than delivering them to the server after the client
/// has moved on (megabytes of an upload's body, to a server that reads slowly).
static inline int aft_sockopt_reset_on_close(void *clientp, curl_socket_t fd, curlsocktype purpose) {
    (void)clientp;
    if (purpose == CURLSOCKTYPE_IPCXN) {
        struct linger l = { 1, 0 };
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    return CURL_SOCKOPT_OK;
}
static inline CURLcode aft_easy_reset_connections_on_close(CURL *h) {
    return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, aft_sockopt_reset_on_close);
}

static inline CURLcode aft_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode aft_easy_getinfo_double(CURL *h, CURLINFO i, double *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode aft_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode aft_easy_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode aft_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode aft_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode aft_multi_setopt_pointer(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode aft_multi_setopt_socket_cb(CURLM *m, aft_curl_socket_cb v) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v); }
static inline CURLMcode aft_multi_setopt_timer_cb(CURLM *m, aft_curl_timer_cb v) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, v); }

/// Fields of a CURLMsg (its union is awkward from Swift).
static inline int aft_msg_is_done(const CURLMsg *m) { return m->msg == CURLMSG_DONE; }
static inline CURLcode aft_msg_result(const CURLMsg *m) { return m->data.result; }
static inline CURL *aft_msg_easy(const CURLMsg *m) { return m->easy_handle; }

/// The PEM text of certificate `i` of the server chain (needs CURLOPT_CERTINFO), or NULL.
static inline const char *aft_certinfo_pem(CURL *h, int i) {
    struct curl_certinfo *ci = NULL;
    if (curl_easy_getinfo(h, CURLINFO_CERTINFO, &ci) != CURLE_OK || ci == NULL) return NULL;
    if (i < 0 || i >= ci->num_of_certs) return NULL;
    for (struct curl_slist *s = ci->certinfo[i]; s; s = s->next) {
        if (strncmp(s->data, "Cert:", 5) == 0) return s->data + 5;
    }
    return NULL;
}
static inline int aft_certinfo_count(CURL *h) {
    struct curl_certinfo *ci = NULL;
    if (curl_easy_getinfo(h, CURLINFO_CERTINFO, &ci) != CURLE_OK || ci == NULL) return 0;
    return ci->num_of_certs;
}
#endif
