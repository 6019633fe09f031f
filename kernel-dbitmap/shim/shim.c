// SPDX-License-Identifier: GPL-2.0-only
/*
 * The shim's implementation: word-at-a-time bit searches, whole-word copy,
 * non-atomic bit operations, and a calloc-backed bitmap_zalloc with
 * per-thread failure injection. Semantics (as documented for the kernel's
 * helpers):
 *
 * - find_first_zero_bit(addr, size), find_next_zero_bit(addr, size, offset):
 *   the smallest clear bit in [offset, size), or size when there is none
 *   (in particular when offset >= size, without reading addr).
 * - find_last_bit(addr, size): the highest set bit below size, or size when
 *   none is set.
 * - Bits of the last word at or above size are never looked at.
 * - bitmap_copy(dst, src, nbits): copies BITS_TO_LONGS(nbits) whole words.
 * - bitmap_zalloc(nbits): zeroed words, NULL on (injected) failure. Like
 *   kmalloc(0), a zero-length request returns a non-NULL pointer.
 * - kfree(p): frees a block of bitmap_zalloc; kfree(NULL) does nothing; a
 *   double or invalid free is caught (see below).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/bitmap.h>

static _Thread_local unsigned int fail_next;

/*
 * Every block of bitmap_zalloc is tracked per thread until kfree, so that a
 * kfree of anything else (a double free, a foreign pointer) is caught
 * before memory is touched:
 *
 * - live: the blocks not yet freed, each with its length in words (which
 *   kdb_shim_block_words reports, so that a reader of a map can check the
 *   length it assumes against the length allocated);
 * - quarantine: the last KDB_QUARANTINE freed blocks, held back from libc
 *   so that no new allocation can reuse their address (a second kfree of
 *   one of them is then a certain double free), plus the pinned ones,
 *   never released (kdb_shim_pin_freed: the safe wrapper pins a map the
 *   header left dangling, so that its double free stays detectable
 *   however many frees come between).
 *
 * A bad kfree aborts with a message on stderr, unless recording was asked
 * for (kdb_shim_record_bad_frees), which counts it and frees nothing.
 *
 * Under AddressSanitizer the shim steps aside: kfree passes every pointer
 * to free() at once, bad ones included, so that ASan reports the double
 * free itself, with its stacks.
 */
#if defined(__SANITIZE_ADDRESS__)
#define KDB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KDB_ASAN 1
#endif
#endif
#ifndef KDB_ASAN
#define KDB_ASAN 0
#endif

#define KDB_QUARANTINE 64

struct kdb_block {
	const void *p;
	size_t words;
};

struct kdb_set {
	struct kdb_block *b;
	size_t len, cap;
};

static _Thread_local struct kdb_set live, quarantine, pinned;
static _Thread_local bool record_bad_frees;
static _Thread_local long bad_frees;

/* Adds block p of `words` words (0 where the length is not kept). */
static void set_push(struct kdb_set *s, const void *p, size_t words)
{
	if (s->len == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct kdb_block *grown = realloc(s->b, cap * sizeof(*grown));

		if (!grown) {
			fprintf(stderr, "kdb shim: out of memory tracking allocations\n");
			abort();
		}
		s->b = grown;
		s->cap = cap;
	}
	s->b[s->len++] = (struct kdb_block){ .p = p, .words = words };
}

/* The block p of s (the most recent first), or NULL. */
static struct kdb_block *set_find(const struct kdb_set *s, const void *p)
{
	for (size_t i = s->len; i-- > 0;)
		if (s->b[i].p == p)
			return &s->b[i];
	return NULL;
}

/* Removes p (the most recent first); false when absent. */
static bool set_remove(struct kdb_set *s, const void *p)
{
	struct kdb_block *b = set_find(s, p);

	if (!b)
		return false;
	memmove(b, b + 1, (size_t)(&s->b[s->len] - (b + 1)) * sizeof(*b));
	s->len--;
	return true;
}

void kdb_shim_fail_next_allocs(unsigned int n)
{
	fail_next = n;
}

unsigned int kdb_shim_pending_failures(void)
{
	return fail_next;
}

long kdb_shim_live_allocs(void)
{
	return (long)live.len;
}

/*
 * The length in words of p, a live block of bitmap_zalloc (the pointer it
 * returned), or -1 when p is not one (freed, foreign, NULL).
 */
long kdb_shim_block_words(const void *p)
{
	const struct kdb_block *b = set_find(&live, p);

	return b ? (long)b->words : -1;
}

void kdb_shim_record_bad_frees(bool record)
{
	record_bad_frees = record;
}

long kdb_shim_bad_frees(void)
{
	return bad_frees;
}

bool kdb_shim_pin_freed(const void *p)
{
	if (KDB_ASAN || !set_remove(&quarantine, p))
		return false;
	set_push(&pinned, p, 0);
	return true;
}

/*
 * Gives a pinned block back to libc: its owner forgot the dangling pointer
 * (the wrapper's forget_dangling), so no second kfree of it can come. False
 * when it was not pinned (never under ASan, which pins nothing).
 */
bool kdb_shim_unpin_freed(const void *p)
{
	if (!set_remove(&pinned, p))
		return false;
	free((void *)p);
	return true;
}

/* Whether kfree hands every pointer to free() for ASan to report. */
bool kdb_shim_under_asan(void)
{
	return KDB_ASAN;
}

unsigned long *kdb_shim_bitmap_zalloc(unsigned int nbits, gfp_t flags)
{
	size_t words = BITS_TO_LONGS((size_t)nbits);
	unsigned long *map;

	(void)flags;
	if (fail_next) {
		fail_next--;
		return NULL;
	}
	map = calloc(words ? words : 1, sizeof(unsigned long));
	if (map)
		set_push(&live, map, words);
	return map;
}

void kdb_shim_kfree(const void *p)
{
	if (!p)
		return;
	if (set_remove(&live, p)) {
		if (KDB_ASAN) {
			free((void *)p);
			return;
		}
		set_push(&quarantine, p, 0);
		if (quarantine.len > KDB_QUARANTINE) {
			const void *oldest = quarantine.b[0].p;

			set_remove(&quarantine, oldest);
			free((void *)oldest);
		}
		return;
	}
	bad_frees++;
	if (KDB_ASAN) {
		free((void *)p); /* ASan reports it */
		return;
	}
	if (record_bad_frees)
		return;
	fprintf(stderr, "kdb shim: kfree(%p): %s\n", p,
		set_find(&quarantine, p) || set_find(&pinned, p) ?
			"double free of a freed bitmap_zalloc block" :
			"not a bitmap_zalloc block (invalid free)");
	abort();
}

/* Bits [0, n) of a word; n in 1..=BITS_PER_LONG. */
static unsigned long low_mask(unsigned long n)
{
	return n >= BITS_PER_LONG ? ~0UL : (1UL << n) - 1;
}

unsigned long kdb_shim_find_next_zero_bit(const unsigned long *addr, unsigned long size,
					  unsigned long offset)
{
	unsigned long idx, word;

	if (offset >= size)
		return size;
	idx = offset / BITS_PER_LONG;
	/* Treat the bits below offset as set. */
	word = ~addr[idx] & ~low_mask(offset % BITS_PER_LONG);
	for (;;) {
		if (word) {
			unsigned long bit = idx * BITS_PER_LONG + __builtin_ctzl(word);

			return bit < size ? bit : size;
		}
		idx++;
		if (idx * BITS_PER_LONG >= size)
			return size;
		word = ~addr[idx];
	}
}

unsigned long kdb_shim_find_first_zero_bit(const unsigned long *addr, unsigned long size)
{
	return kdb_shim_find_next_zero_bit(addr, size, 0);
}

unsigned long kdb_shim_find_last_bit(const unsigned long *addr, unsigned long size)
{
	unsigned long idx, word;

	if (!size)
		return size;
	idx = (size - 1) / BITS_PER_LONG;
	word = addr[idx] & low_mask(size - idx * BITS_PER_LONG);
	for (;;) {
		if (word)
			return idx * BITS_PER_LONG + (BITS_PER_LONG - 1 - __builtin_clzl(word));
		if (!idx)
			return size;
		word = addr[--idx];
	}
}

void kdb_shim_bitmap_copy(unsigned long *dst, const unsigned long *src, unsigned int nbits)
{
	memcpy(dst, src, BITS_TO_LONGS((size_t)nbits) * sizeof(unsigned long));
}

void kdb_shim_set_bit(unsigned long nr, unsigned long *addr)
{
	addr[nr / BITS_PER_LONG] |= 1UL << (nr % BITS_PER_LONG);
}

void kdb_shim_clear_bit(unsigned long nr, unsigned long *addr)
{
	addr[nr / BITS_PER_LONG] &= ~(1UL << (nr % BITS_PER_LONG));
}

bool kdb_shim_test_bit(unsigned long nr, const unsigned long *addr)
{
	return (addr[nr / BITS_PER_LONG] >> (nr % BITS_PER_LONG)) & 1;
}
