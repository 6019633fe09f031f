// SPDX-License-Identifier: GPL-2.0-only
/*
 * Compiles the kernel's drivers/android/dbitmap.h (found by build.rs, never
 * copied into this repository) against our <linux/bitmap.h> shim, and
 * exports one non-inline function per static inline function of the header.
 */
#include <linux/bitmap.h>

#include "dbitmap.h"

#ifndef _LINUX_DBITMAP_H
#error "dbitmap.h is not the kernel's drivers/android/dbitmap.h"
#endif

unsigned long kdb_nbits_min(void) { return NBITS_MIN; }
size_t kdb_sizeof_dbitmap(void) { return sizeof(struct dbitmap); }
size_t kdb_alignof_dbitmap(void) { return _Alignof(struct dbitmap); }

int kdb_enabled(struct dbitmap *dmap) { return dbitmap_enabled(dmap); }
void kdb_free(struct dbitmap *dmap) { dbitmap_free(dmap); }
unsigned int kdb_shrink_nbits(struct dbitmap *dmap) { return dbitmap_shrink_nbits(dmap); }
void kdb_replace(struct dbitmap *dmap, unsigned long *new, unsigned int nbits)
{
	dbitmap_replace(dmap, new, nbits);
}
void kdb_shrink(struct dbitmap *dmap, unsigned long *new, unsigned int nbits)
{
	dbitmap_shrink(dmap, new, nbits);
}
unsigned int kdb_grow_nbits(struct dbitmap *dmap) { return dbitmap_grow_nbits(dmap); }
void kdb_grow(struct dbitmap *dmap, unsigned long *new, unsigned int nbits)
{
	dbitmap_grow(dmap, new, nbits);
}
int kdb_acquire_next_zero_bit(struct dbitmap *dmap, unsigned long offset, unsigned long *bit)
{
	return dbitmap_acquire_next_zero_bit(dmap, offset, bit);
}
void kdb_clear_bit(struct dbitmap *dmap, unsigned long bit) { dbitmap_clear_bit(dmap, bit); }
int kdb_init(struct dbitmap *dmap) { return dbitmap_init(dmap); }
