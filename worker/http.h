/* http.h - how remat-worker calls rematd over libcurl, written once: the
 * URL from the server's base and a path, the bearer token, the connect
 * timeout, and the settings that keep a stop prompt (no signals, and
 * CURLOPT_QUICK_EXIT).  main.c's job calls and cache.c's model fetch each
 * add what is theirs (a body, a reply buffer, an overall timeout or a
 * speed floor) and run the transfer. */
#ifndef REMAT_WORKER_HTTP_H
#define REMAT_WORKER_HTTP_H

#include <curl/curl.h>

/* A handle for server (a base URL; a trailing slash is dropped) + path,
 * over the Unix socket REMAT_SERVER_SOCKET names when it is set,
 * with token (NULL or "": none) as "Authorization: Bearer" appended to
 * *headers (which may hold the caller's own, or be NULL) and *headers set
 * as the handle's.  Returns the handle, or NULL when libcurl has none to
 * give.  Free both with rw_http_close, whatever happened. */
CURL *rw_http_open(const char *server, const char *path, const char *token,
                   struct curl_slist **headers);

/* Frees the handle (may be NULL) and the header list. */
void rw_http_close(CURL *c, struct curl_slist *headers);

#endif
