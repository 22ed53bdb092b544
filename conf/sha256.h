/* SHA-256 (FIPS 180-4), for the hash of the loaded limits file that INFO
 * and /metrics report: an operator compares it with `sha256sum` to see
 * which file a proxy runs. Streaming (init, update, final) so a caller
 * hashes what it already holds without copying. Leaf layer: libc only. */
#ifndef PX_CONF_SHA256_H
#define PX_CONF_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of a digest, and of its lowercase hex text with the NUL. */
#define SHA256_LEN     32
#define SHA256_HEX_LEN 65

struct sha256 {
    uint32_t h[8];         /* the chaining state */
    uint64_t total;        /* bytes hashed so far */
    unsigned char blk[64]; /* the block being filled */
    size_t nblk;           /* bytes of blk in use */
};

void sha256_init(struct sha256 *s);

/* Hashes `len` bytes of `p` (len 0 with p NULL is fine). */
void sha256_update(struct sha256 *s, const void *p, size_t len);

/* Pads, writes the digest to `out` and leaves `s` spent (init it again to
 * reuse it). */
void sha256_final(struct sha256 *s, unsigned char out[SHA256_LEN]);

/* The digest of `len` bytes of `p` as lowercase hex, as sha256sum prints
 * it, NUL-ended. */
void sha256_hex(const void *p, size_t len, char out[SHA256_HEX_LEN]);

#endif /* PX_CONF_SHA256_H */
