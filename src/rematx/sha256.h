/* sha256.h - SHA-256 (FIPS 180-4), one-shot and streaming.
 *
 * It fingerprints request bodies for Idempotency-Key and names uploaded
 * models by their content: rematd hashes an archive while it streams to
 * disk, the worker hashes what it fetched before it loads it.  Nothing
 * secret rests on it, so it is small and portable rather than fast. */
#ifndef REMATX_SHA256_H
#define REMATX_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct rematx_sha256 {
    uint32_t h[8];
    uint64_t len;            /* bytes hashed so far */
    unsigned char block[64]; /* the partial block */
    size_t fill;             /* bytes in block */
};

void rematx_sha256_init(struct rematx_sha256 *c);
void rematx_sha256_update(struct rematx_sha256 *c, const void *data, size_t n);
/* The digest as 64 lowercase hex characters and a NUL; c is spent. */
void rematx_sha256_final_hex(struct rematx_sha256 *c, char out[65]);
/* One shot: init, update, final. */
void rematx_sha256_hex(const void *data, size_t n, char out[65]);
/* Whether s is 64 lowercase hex characters (a digest as written here). */
int rematx_is_sha256_hex(const char *s);

#endif
