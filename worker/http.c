/* http.c - remat-worker's libcurl set-up (http.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

CURL *rw_http_open(const char *server, const char *path, const char *token,
                   struct curl_slist **headers)
{
    CURL *c = curl_easy_init();
    if (c == NULL)
        return NULL;
    char url[1200];
    size_t sl = strlen(server);
    snprintf(url, sizeof url, "%.*s%s", (int)(sl > 0 && server[sl - 1] == '/' ? sl - 1 : sl),
             server, path);
    if (token != NULL && token[0] != '\0') {
        char auth[600];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        *headers = curl_slist_append(*headers, auth);
    }
    /* libcurl copies the URL; the header lines were copied by the append. */
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *headers);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    /* A worker rematd supervises reaches it on the Unix socket rematd
     * keeps for its workers (REMAT_SERVER_SOCKET): the URL still names the
     * path, and clients holding every connection their address may have
     * do not keep the worker out. */
    const char *sock = getenv("REMAT_SERVER_SOCKET");
    if (sock != NULL && sock[0] != '\0')
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075700
    /* A name lookup runs on a thread of libcurl's; without this, a transfer
     * cut short (by SIGTERM or a timeout) waits for the lookup to end, and
     * glibc gives up on a name server that drops queries only after 5 s
     * times its attempts.  Podman's DNS (aardvark-dns) drops them while a
     * container joins or leaves the network: a stop then came 10 s late
     * and the container was SIGKILLed.  With this the thread is left to
     * end on its own and frees what it holds. */
    curl_easy_setopt(c, CURLOPT_QUICK_EXIT, 1L);
#endif
    return c;
}

void rw_http_close(CURL *c, struct curl_slist *headers)
{
    if (c != NULL)
        curl_easy_cleanup(c);
    curl_slist_free_all(headers);
}
