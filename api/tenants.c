/* tenants.c - the tokens file and the bearer token check (tenants.h).
 *
 * The file is text, one token a line:
 *
 *     # comments and blank lines are skipped
 *     <tenant> <token>
 *
 * separated by spaces or tabs.  A tenant may have several lines (several
 * tokens, to rotate one); a token appears once in the file and is not
 * REMAT_TOKEN.  Anything else stops rematd at start with the line named:
 * a tenant name not [a-z0-9_-]{1,64}, a token not RFC 6750's b64token or
 * not 16 to 255 characters long, a third word.  The file holds secrets: one
 * that others may read, or that the group or others may write, is refused;
 * one its group may read is started with a warning (a Kubernetes secret
 * mounted for an fsGroup is group-readable). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "rematd.h"
#include "tenants.h"

struct entry {
    char tenant[REMATD_TENANT_MAX + 1];
    char token[REMATD_TENANT_TOKEN_MAX + 1];
    size_t len;
};

struct rematd_tenants {
    struct entry *e;
    size_t n, cap;
    size_t tenants; /* distinct names */
};

int rematd_tenant_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > REMATD_TENANT_MAX)
        return 0;
    return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* RFC 6750 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+"
 * / "/" ) *"=". */
static int b64token_ok(const char *t)
{
    size_t n = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/");
    if (n == 0)
        return 0;
    return t[n + strspn(t + n, "=")] == '\0';
}

static int add(struct rematd_tenants *t, const char *tenant, const char *token)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->e[i].token, token) == 0)
            return 1;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 8;
        struct entry *ne = realloc(t->e, nc * sizeof *ne);
        if (!ne)
            return -1;
        t->e = ne;
        t->cap = nc;
    }
    int seen = 0;
    for (size_t i = 0; i < t->n && !seen; i++)
        seen = strcmp(t->e[i].tenant, tenant) == 0;
    struct entry *e = &t->e[t->n++];
    snprintf(e->tenant, sizeof e->tenant, "%s", tenant);
    snprintf(e->token, sizeof e->token, "%s", token);
    e->len = strlen(token);
    t->tenants += !seen;
    return 0;
}

/* The file's mode, checked before it is read. */
static int check_mode(const char *path, FILE *f, char *errbuf, size_t errlen)
{
    struct stat sb;
    if (fstat(fileno(f), &sb) < 0) {
        snprintf(errbuf, errlen, "--tokens-file %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(errbuf, errlen, "--tokens-file %s: not a regular file", path);
        return -1;
    }
    if (sb.st_mode & (S_IROTH | S_IWOTH | S_IWGRP)) {
        snprintf(errbuf, errlen,
                 "--tokens-file %s: mode %03o lets others read it or others write it; it holds "
                 "secrets (chmod 600)",
                 path, (unsigned)(sb.st_mode & 0777));
        return -1;
    }
    if (sb.st_mode & S_IRGRP) {
        char mode[8];
        snprintf(mode, sizeof mode, "%03o", (unsigned)(sb.st_mode & 0777));
        rematd_log("warn", "the tokens file is readable by its group",
                   json_pack("{s:s, s:s}", "path", path, "mode", mode));
    }
    return 0;
}

static int load_file(struct rematd_tenants *t, const char *path, char *errbuf, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(errbuf, errlen, "--tokens-file %s: %s", path, strerror(errno));
        return -1;
    }
    if (check_mode(path, f, errbuf, errlen) < 0) {
        fclose(f);
        return -1;
    }
    char line[1024];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            snprintf(errbuf, errlen, "--tokens-file %s line %d: longer than %zu bytes", path,
                     lineno, sizeof line - 2);
            rc = -1;
            break;
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        char *p = line + strspn(line, " \t");
        if (*p == '\0' || *p == '#')
            continue;
        char *name = p;
        p += strcspn(p, " \t");
        if (*p)
            *p++ = '\0';
        p += strspn(p, " \t");
        char *token = p;
        p += strcspn(p, " \t");
        if (*p)
            *p++ = '\0';
        p += strspn(p, " \t");
        const char *why = NULL;
        if (!rematd_tenant_name_ok(name))
            why = "the tenant name is not [a-z0-9_-]{1,64}";
        else if (*token == '\0')
            why = "want '<tenant> <token>', no token";
        else if (*p != '\0' && *p != '#')
            why = "want '<tenant> <token>', more words follow";
        else if (!b64token_ok(token))
            why = "the token is not an RFC 6750 b64token (letters, digits, -._~+/ then =)";
        else if (strlen(token) < REMATD_TENANT_TOKEN_MIN || strlen(token) > REMATD_TENANT_TOKEN_MAX)
            why = "the token is not 16 to 255 characters long";
        if (why) {
            snprintf(errbuf, errlen, "--tokens-file %s line %d: %s", path, lineno, why);
            rc = -1;
            break;
        }
        int added = add(t, name, token);
        if (added < 0) {
            snprintf(errbuf, errlen, "--tokens-file %s: out of memory", path);
            rc = -1;
        } else if (added > 0) {
            snprintf(errbuf, errlen,
                     "--tokens-file %s line %d: this token is given already (to a tenant above, "
                     "or as REMAT_TOKEN)",
                     path, lineno);
            rc = -1;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(errbuf, errlen, "--tokens-file %s: %s", path, strerror(errno));
        rc = -1;
    }
    fclose(f);
    if (rc == 0 && t->n == 0) {
        snprintf(errbuf, errlen, "--tokens-file %s: no token in it", path);
        rc = -1;
    }
    return rc;
}

struct rematd_tenants *rematd_tenants_load(const char *default_token, const char *path,
                                           char *errbuf, size_t errlen)
{
    struct rematd_tenants *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    if (default_token && default_token[0] && add(t, REMATD_TENANT_DEFAULT, default_token) < 0) {
        snprintf(errbuf, errlen, "out of memory");
        rematd_tenants_free(t);
        return NULL;
    }
    if (path && path[0] && load_file(t, path, errbuf, errlen) < 0) {
        rematd_tenants_free(t);
        return NULL;
    }
    return t;
}

void rematd_tenants_free(struct rematd_tenants *t)
{
    if (!t)
        return;
    /* The tokens are secrets: not left behind in freed memory. */
    if (t->e)
        memset(t->e, 0, t->cap * sizeof *t->e);
    free(t->e);
    free(t);
}

int rematd_tenants_any(const struct rematd_tenants *t)
{
    return t && t->n > 0;
}

size_t rematd_tenants_count(const struct rematd_tenants *t)
{
    return t && t->tenants > 0 ? t->tenants : 1;
}

const char *rematd_tenants_match(const struct rematd_tenants *t, const char *authorization)
{
    if (!t || !authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *given = authorization + 7;
    size_t a = strlen(given);
    const char *found = NULL;
    /* Every token is compared in full and the loop never ends early, so
     * the time depends on the table and the length given, not on which
     * token, or how much of one, a guess got right. */
    for (size_t k = 0; k < t->n; k++) {
        const struct entry *e = &t->e[k];
        unsigned char diff = (unsigned char)(a != e->len);
        for (size_t i = 0; i < e->len; i++)
            diff |= (unsigned char)(given[i < a ? i : 0] ^ e->token[i]);
        if (diff == 0)
            found = e->tenant;
    }
    return found;
}
