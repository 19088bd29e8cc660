/*
 * cpu_arena.h - the memory the CPU backends keep weights in: the bytes of
 * many weights side by side in a few large mappings, each backed by 2 MiB
 * pages where the kernel has them.
 *
 * A decode reads every weight once per token. A small model's matrices are
 * a megabyte or two each; mapped one by one, none spans a whole huge page
 * and the walk over them takes a TLB miss every 4 KiB, which costs dearly
 * in a virtual machine. Packed into slabs that start on a huge page they
 * are read through 2 MiB pages like the large ones.
 *
 * A slab is returned to the kernel when the last weight in it is freed.
 * Weights of models loaded side by side may share a slab; unloading one
 * model then returns its slabs' memory only with the other's.
 */
#ifndef LOOM_CPU_ARENA_H
#define LOOM_CPU_ARENA_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stddef.h>

#define CPU_HUGE_PAGE_BYTES ((size_t)2 << 20)

/* A private anonymous mapping of size bytes that starts on a huge page,
 * advised to be backed by huge pages; NULL when the kernel has no memory. */
char *cpu_map_huge(size_t size);

/* size bytes in a slab, into *out (its handle is the slab's, never its
 * base); false when the kernel has no memory for another slab. */
bool cpu_arena_alloc(size_t size, loom_buffer *out);

/* A buffer cpu_arena_alloc made. */
bool cpu_arena_owns(const loom_buffer *buf);

void cpu_arena_free(loom_buffer *buf);

#endif
