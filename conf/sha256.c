/* SHA-256 as FIPS 180-4 section 6.2 describes it: 64-byte blocks, a
 * 64-word message schedule, 64 rounds, and padding with 0x80, zeros and
 * the bit length as a big-endian 64-bit number. Written for clarity, not
 * speed: it hashes one limits file per load. */
#include "conf/sha256.h"

#include <string.h>

/* The first 32 bits of the fractional parts of the cube roots of the
 * first 64 primes (FIPS 180-4, 4.2.2). */
static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t sha256_rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

/* Folds one 64-byte block into the state. */
static void sha256_block(struct sha256 *s, const unsigned char *b)
{
    uint32_t w[64], v[8], t1, t2;
    unsigned i;

    for (i = 0; i < 16; i++) {
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | (uint32_t)b[4 * i + 3];
    }
    for (i = 16; i < 64; i++) {
        uint32_t s0 = sha256_rotr(w[i - 15], 7) ^ sha256_rotr(w[i - 15], 18) ^
                      (w[i - 15] >> 3);
        uint32_t s1 = sha256_rotr(w[i - 2], 17) ^ sha256_rotr(w[i - 2], 19) ^
                      (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof(v));
    for (i = 0; i < 64; i++) {
        /* v[0..7] are a..h of the standard. */
        t1 = v[7] +
             (sha256_rotr(v[4], 6) ^ sha256_rotr(v[4], 11) ^
              sha256_rotr(v[4], 25)) +
             ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha256_k[i] + w[i];
        t2 = (sha256_rotr(v[0], 2) ^ sha256_rotr(v[0], 13) ^
              sha256_rotr(v[0], 22)) +
             ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof(v[0]));
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (i = 0; i < 8; i++) {
        s->h[i] += v[i];
    }
}

void sha256_init(struct sha256 *s)
{
    /* The first 32 bits of the fractional parts of the square roots of
     * the first 8 primes (FIPS 180-4, 5.3.3). */
    static const uint32_t h0[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };

    memcpy(s->h, h0, sizeof(h0));
    s->total = 0;
    s->nblk = 0;
}

void sha256_update(struct sha256 *s, const void *p, size_t len)
{
    const unsigned char *in = p;

    s->total += len;
    while (len > 0) {
        size_t take = sizeof(s->blk) - s->nblk;
        if (take > len) {
            take = len;
        }
        memcpy(s->blk + s->nblk, in, take);
        s->nblk += take;
        in += take;
        len -= take;
        if (s->nblk == sizeof(s->blk)) {
            sha256_block(s, s->blk);
            s->nblk = 0;
        }
    }
}

void sha256_final(struct sha256 *s, unsigned char out[SHA256_LEN])
{
    uint64_t bits = s->total * 8;
    unsigned i;

    s->blk[s->nblk++] = 0x80;
    if (s->nblk > 56) {
        memset(s->blk + s->nblk, 0, sizeof(s->blk) - s->nblk);
        sha256_block(s, s->blk);
        s->nblk = 0;
    }
    memset(s->blk + s->nblk, 0, 56 - s->nblk);
    for (i = 0; i < 8; i++) {
        s->blk[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
    }
    sha256_block(s, s->blk);
    for (i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
}

void sha256_hex(const void *p, size_t len, char out[SHA256_HEX_LEN])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[SHA256_LEN];
    struct sha256 s;
    unsigned i;

    sha256_init(&s);
    sha256_update(&s, p, len);
    sha256_final(&s, d);
    for (i = 0; i < SHA256_LEN; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * SHA256_LEN] = '\0';
}
