/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A user-space stand-in for <linux/bitmap.h>, written for this project from
 * the documented semantics of the kernel's helpers (not copied from it). It
 * provides exactly what drivers/android/dbitmap.h uses, plus the few helpers
 * the tests need. The functions live in shim.c under a kdb_shim_ prefix so
 * that they can be tested through FFI; the kernel's names below forward to
 * them.
 *
 * Allocation failure is injectable per thread (kdb_shim_fail_next_allocs),
 * and live allocations are tracked per thread, so a test can check that the
 * header frees every map it is handed, and a double free is caught before
 * it touches memory (shim.c says how).
 */
#ifndef KDB_SHIM_LINUX_BITMAP_H
#define KDB_SHIM_LINUX_BITMAP_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

typedef unsigned int gfp_t;
#define GFP_KERNEL ((gfp_t)0)

#define BITS_PER_BYTE 8
#define BITS_PER_TYPE(type) (sizeof(type) * BITS_PER_BYTE)
#define BITS_PER_LONG BITS_PER_TYPE(unsigned long)
#define BITS_TO_LONGS(nr) (((nr) + BITS_PER_LONG - 1) / BITS_PER_LONG)

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The kernel's min() also type-checks; both operands are unsigned int here. */
#define min(a, b) ((a) < (b) ? (a) : (b))

/* Failure injection and accounting (per thread). */
void kdb_shim_fail_next_allocs(unsigned int n);
unsigned int kdb_shim_pending_failures(void);
long kdb_shim_live_allocs(void);
/* The length in words of a live bitmap_zalloc block, -1 for anything else. */
long kdb_shim_block_words(const void *p);
/* Double and invalid frees: counted, and recorded instead of aborting. */
void kdb_shim_record_bad_frees(bool record);
long kdb_shim_bad_frees(void);
bool kdb_shim_pin_freed(const void *p);
bool kdb_shim_unpin_freed(const void *p);
bool kdb_shim_under_asan(void);

unsigned long *kdb_shim_bitmap_zalloc(unsigned int nbits, gfp_t flags);
void kdb_shim_kfree(const void *p);
unsigned long kdb_shim_find_first_zero_bit(const unsigned long *addr, unsigned long size);
unsigned long kdb_shim_find_next_zero_bit(const unsigned long *addr, unsigned long size,
					  unsigned long offset);
unsigned long kdb_shim_find_last_bit(const unsigned long *addr, unsigned long size);
void kdb_shim_bitmap_copy(unsigned long *dst, const unsigned long *src, unsigned int nbits);
void kdb_shim_set_bit(unsigned long nr, unsigned long *addr);
void kdb_shim_clear_bit(unsigned long nr, unsigned long *addr);
bool kdb_shim_test_bit(unsigned long nr, const unsigned long *addr);

static inline unsigned long *bitmap_zalloc(unsigned int nbits, gfp_t flags)
{
	return kdb_shim_bitmap_zalloc(nbits, flags);
}

static inline void bitmap_free(const unsigned long *bitmap)
{
	kdb_shim_kfree(bitmap);
}

static inline void kfree(const void *p)
{
	kdb_shim_kfree(p);
}

static inline unsigned long find_first_zero_bit(const unsigned long *addr, unsigned long size)
{
	return kdb_shim_find_first_zero_bit(addr, size);
}

static inline unsigned long find_next_zero_bit(const unsigned long *addr, unsigned long size,
					       unsigned long offset)
{
	return kdb_shim_find_next_zero_bit(addr, size, offset);
}

static inline unsigned long find_last_bit(const unsigned long *addr, unsigned long size)
{
	return kdb_shim_find_last_bit(addr, size);
}

static inline void bitmap_copy(unsigned long *dst, const unsigned long *src, unsigned int nbits)
{
	kdb_shim_bitmap_copy(dst, src, nbits);
}

/* The kernel's set_bit/clear_bit are atomic; the dbitmap is used under a lock. */
static inline void set_bit(unsigned long nr, unsigned long *addr)
{
	kdb_shim_set_bit(nr, addr);
}

static inline void clear_bit(unsigned long nr, unsigned long *addr)
{
	kdb_shim_clear_bit(nr, addr);
}

static inline bool test_bit(unsigned long nr, const unsigned long *addr)
{
	return kdb_shim_test_bit(nr, addr);
}

#endif
