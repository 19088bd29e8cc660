/* cpu_arena.c - weights side by side in huge-page slabs (cpu_arena.h). */
#include "cpu_arena.h"

#include "cpu_share.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

/* A slab holds this much unless one weight needs more: a few dozen of a
 * small model's matrices, a fraction of a large one's. */
#define SLAB_BYTES ((size_t)64 << 20)

typedef struct cpu_slab {
	char *base;
	size_t size;
	size_t used;
	int live; /* buffers in it not yet freed */
} cpu_slab;

/* One arena for the process: every backend instance fills the same slab,
 * and a buffer may outlive the instance that made it. */
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static cpu_slab *current; /* the slab new buffers go into; never empty */

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

/* Mapped with a huge page's worth to spare, then trimmed to start on one,
 * so that every whole huge page of it can be one. */
char *cpu_map_huge(size_t size)
{
	char *m = mmap(NULL, size + CPU_HUGE_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	size_t head = (CPU_HUGE_PAGE_BYTES - (uintptr_t)m % CPU_HUGE_PAGE_BYTES) % CPU_HUGE_PAGE_BYTES;
	if (head > 0)
		munmap(m, head);
	munmap(m + head + size, CPU_HUGE_PAGE_BYTES - head);
	madvise(m + head, size, MADV_HUGEPAGE);
	return m + head;
}

static cpu_slab *slab_new(size_t size)
{
	cpu_slab *s = malloc(sizeof(*s));
	char *base = s != NULL ? cpu_map_huge(size) : NULL;

	if (base == NULL) {
		free(s);
		return NULL;
	}
	*s = (cpu_slab){.base = base, .size = size};
	return s;
}

bool cpu_arena_alloc(size_t size, loom_buffer *out)
{
	size_t need = cpu_align_up(size > 0 ? size : 1);

	pthread_mutex_lock(&arena_lock);
	if (current == NULL || current->size - current->used < need) {
		cpu_slab *s = slab_new(round_up(need > SLAB_BYTES ? need : SLAB_BYTES, CPU_HUGE_PAGE_BYTES));
		if (s == NULL) {
			pthread_mutex_unlock(&arena_lock);
			return false;
		}
		/* The old slab's free tail is never touched, so it costs no
		 * memory; the slab goes with its last buffer. */
		current = s;
	}
	*out = (loom_buffer){.handle = current, .base = current->base + current->used, .size = size};
	current->used += need;
	current->live++;
	pthread_mutex_unlock(&arena_lock);
	return true;
}

bool cpu_arena_owns(const loom_buffer *buf)
{
	return buf->handle != NULL && buf->handle != buf->base;
}

void cpu_arena_free(loom_buffer *buf)
{
	cpu_slab *s = buf->handle;

	pthread_mutex_lock(&arena_lock);
	if (--s->live == 0) {
		if (s == current)
			current = NULL;
		munmap(s->base, s->size);
		free(s);
	}
	pthread_mutex_unlock(&arena_lock);
	*buf = (loom_buffer){0};
}
