// SPDX-License-Identifier: GPL-2.0-only
/*
 * Compiles the kernel's drivers/android/dbitmap.h (found by build.rs, never
 * copied into this repository) against our <linux/bitmap.h> shim, and
 * exports one non-inline function per static inline function of the header.
 *
 * build.rs compiles this file once per header it has (6.12's, mainline's,
 * and the historical variant patched from 6.12's), each time with its own
 * KDB_PREFIX, so that every header gets a set of symbols of its own:
 * kdb_init, kdb_m73_init, kdb_hist_init, ...
 */
#include <linux/bitmap.h>

#include "dbitmap.h"

#ifndef _LINUX_DBITMAP_H
#error "dbitmap.h is not the kernel's drivers/android/dbitmap.h"
#endif

#ifndef KDB_PREFIX
#define KDB_PREFIX kdb_
#endif
#define KDB_CAT2(a, b) a##b
#define KDB_CAT(a, b) KDB_CAT2(a, b)
#define KDB(name) KDB_CAT(KDB_PREFIX, name)

unsigned long KDB(nbits_min)(void) { return NBITS_MIN; }
size_t KDB(sizeof_dbitmap)(void) { return sizeof(struct dbitmap); }
size_t KDB(alignof_dbitmap)(void) { return _Alignof(struct dbitmap); }

int KDB(enabled)(struct dbitmap *dmap) { return dbitmap_enabled(dmap); }
void KDB(free)(struct dbitmap *dmap) { dbitmap_free(dmap); }
unsigned int KDB(shrink_nbits)(struct dbitmap *dmap) { return dbitmap_shrink_nbits(dmap); }
void KDB(replace)(struct dbitmap *dmap, unsigned long *new, unsigned int nbits)
{
	dbitmap_replace(dmap, new, nbits);
}
void KDB(shrink)(struct dbitmap *dmap, unsigned long *new, unsigned int nbits)
{
	dbitmap_shrink(dmap, new, nbits);
}
unsigned int KDB(grow_nbits)(struct dbitmap *dmap) { return dbitmap_grow_nbits(dmap); }
void KDB(grow)(struct dbitmap *dmap, unsigned long *new, unsigned int nbits)
{
	dbitmap_grow(dmap, new, nbits);
}
int KDB(acquire_next_zero_bit)(struct dbitmap *dmap, unsigned long offset, unsigned long *bit)
{
	return dbitmap_acquire_next_zero_bit(dmap, offset, bit);
}
void KDB(clear_bit)(struct dbitmap *dmap, unsigned long bit) { dbitmap_clear_bit(dmap, bit); }
int KDB(init)(struct dbitmap *dmap) { return dbitmap_init(dmap); }
