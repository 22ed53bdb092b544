/* Redis Cluster hash slots: CRC16 and {hash tag} rules, pure.
 *
 * A key belongs to slot CRC16(k) mod 16384, where k is the whole key unless
 * the key holds a non-empty hash tag: then k is the text between the first
 * '{' and the first '}' after it. This lets a client force several keys into
 * one slot ("{user1000}.following", "{user1000}.followers"). The router uses
 * slot_for_key to pick the node that owns a command's keys; the limiter uses
 * it to check that its hash-tagged keys share a shard.
 *
 * Leaf layer: libc only, no state, safe from any thread. */
#ifndef PX_PARSER_SLOT_H
#define PX_PARSER_SLOT_H

#include <stddef.h>
#include <stdint.h>

/* Hash slots of a Redis Cluster (CLUSTER_SLOTS in Redis's cluster.h). */
#define SLOT_COUNT 16384u

/* CRC16 of len bytes, the XMODEM variant Redis Cluster uses (polynomial
 * 0x1021, initial value 0, no reflection, no final xor). buf may be NULL
 * when len is 0. slot_crc16("123456789", 9) is 0x31c3. */
uint16_t slot_crc16(const char *buf, size_t len);

/* The hash slot (0 .. SLOT_COUNT - 1) of a key of len bytes, which may hold
 * any byte, NUL included. key may be NULL when len is 0 (the empty key is in
 * slot 0). Honours the first hash tag as Redis does: the first '{', then the
 * first '}' after it; an empty tag "{}", or a '{' without a '}' after it,
 * means the whole key is hashed. */
unsigned slot_for_key(const char *key, size_t len);

#endif /* PX_PARSER_SLOT_H */
