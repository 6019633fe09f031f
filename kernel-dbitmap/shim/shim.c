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
 */
#include <stdlib.h>
#include <string.h>

#include <linux/bitmap.h>

static _Thread_local unsigned int fail_next;
static _Thread_local long live_allocs;

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
	return live_allocs;
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
		live_allocs++;
	return map;
}

void kdb_shim_kfree(const void *p)
{
	if (!p)
		return;
	live_allocs--;
	free((void *)p);
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
