/* tenants.h - who a client is: the bearer tokens rematd accepts and the
 * tenant each one names (docs/security.md, "Tenants").
 *
 * The tokens come from REMAT_TOKEN (the tenant "default") and from the
 * tokens file (--tokens-file, REMAT_TOKENS_FILE), read once at start: a
 * new file takes a restart, as every other setting does.  Without any
 * token rematd is anonymous and every request is the tenant "default";
 * main.c allows that only on loopback or with --allow-anonymous.
 *
 * A tenant owns the uploaded models, jobs, plans and Idempotency-Key
 * records it creates; another tenant's id reads as an unknown one (404).
 * Rows written before tenants existed belong to "default".  The table is
 * made once before the server starts and never changes after, so the MHD
 * threads read it without a lock and routes may keep a tenant's name (a
 * pointer into it) for the whole request. */
#ifndef REMATD_TENANTS_H
#define REMATD_TENANTS_H

#include <stddef.h>

/* A tenant's name: [a-z0-9_-]{1,64}. */
#define REMATD_TENANT_MAX 64
/* The tenant of REMAT_TOKEN, of an anonymous rematd, and of the rows that
 * older versions wrote. */
#define REMATD_TENANT_DEFAULT "default"
/* A token from the file: RFC 6750's b64token, 16 to 255 characters. */
#define REMATD_TENANT_TOKEN_MIN 16
#define REMATD_TENANT_TOKEN_MAX 255

struct rematd_tenants;

/* The table of default_token (REMAT_TOKEN, "" for none) and of the file
 * at path (NULL or "": none).  Returns a new table, or NULL after writing
 * to errbuf why (the file's name and line for a bad line, a duplicate
 * token, a file others may read or write, or no memory). */
struct rematd_tenants *rematd_tenants_load(const char *default_token, const char *path,
                                           char *errbuf, size_t errlen);
void rematd_tenants_free(struct rematd_tenants *t);
/* Whether t has any token (no token: every client is "default"). */
int rematd_tenants_any(const struct rematd_tenants *t);
/* How many tenants t names (1 without tokens). */
size_t rematd_tenants_count(const struct rematd_tenants *t);
/* The tenant whose token authorization ("Bearer <token>", the header's
 * value; NULL allowed) carries: borrowed from t, or NULL when it carries
 * none of t's tokens.  Every token is compared in full, whichever matches,
 * so the time says nothing about which one came close. */
const char *rematd_tenants_match(const struct rematd_tenants *t, const char *authorization);
/* Whether name is a valid tenant name. */
int rematd_tenant_name_ok(const char *name);

#endif
