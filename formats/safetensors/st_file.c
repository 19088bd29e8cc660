/* st_file.c - opening a checkpoint: find its files, map its shards into one
 * region, read their headers, check the tensors against each other and the
 * index, and gather config.json and the tokenizer into metadata. */
#include "st_config.h"
#include "st_file.h"
#include "st_header.h"
#include "st_index.h"
#include "st_json.h"
#include "st_layout.h"
#include "st_meta.h"
#include "st_tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* One file of the checkpoint and its slot in the mapping. */
typedef struct st_shard {
	char path[PATH_MAX];
	int fd;           /* open only while mapping */
	uint64_t size;
	uint8_t *base;
	st_header header;
} st_shard;

/* What the plugin owns behind the loom_model_file it returns. */
typedef struct st_file {
	loom_model_file pub; /* first, so close() can convert back */
	char format[48];
	st_shard *shards;
	int n_shards;
	void *map;
	size_t map_size;
	/* Every shard's tensors in shard order; the names belong to the
	 * shards' headers. */
	loom_file_tensor *tensors;
	uint64_t n_tensors;
	st_meta meta;
} st_file;

/* The shards to map: the index's, in its (sorted) order, or the one file. */
static bool list_shards(const loom_host *host, const st_layout *layout, const st_index *index,
			st_file *f)
{
	f->n_shards = layout->sharded ? index->n_shards : 1;
	f->shards = calloc((size_t)f->n_shards, sizeof(*f->shards));
	if (f->shards == NULL) {
		host->set_error("%s: out of memory", layout->weights);
		return false;
	}
	for (int i = 0; i < f->n_shards; i++)
		f->shards[i].fd = -1;
	if (!layout->sharded) {
		snprintf(f->shards[0].path, PATH_MAX, "%s", layout->weights);
		return true;
	}
	for (int i = 0; i < f->n_shards; i++) {
		if (!st_layout_join(f->shards[i].path, layout->dir, index->shards[i])) {
			host->set_error("%s: the path of shard " ST_NAME_FMT " is too long",
					layout->weights, index->shards[i]);
			return false;
		}
	}
	return true;
}

static bool open_shard(const loom_host *host, st_shard *s)
{
	struct stat st;

	s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0) {
		host->set_error("%s: cannot open: %s", s->path, strerror(errno));
		return false;
	}
	if (fstat(s->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		host->set_error("%s: not a regular file", s->path);
		return false;
	}
	/* mmap cannot map zero bytes; say plainly what is wrong instead. */
	if (st.st_size == 0) {
		host->set_error("%s: empty file (0 bytes), not a safetensors file", s->path);
		return false;
	}
	s->size = (uint64_t)st.st_size;
	return true;
}

/* A PROT_NONE reservation of every shard's page-rounded size, then each
 * shard mapped over its slot: the core hands a backend one buffer, and
 * every tensor's bytes lie inside it. */
static bool map_shards(const loom_host *host, st_file *f)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), total = 0;
	uint8_t *at;

	for (int i = 0; i < f->n_shards; i++) {
		st_shard *s = &f->shards[i];

		if (!open_shard(host, s))
			return false;
		if (__builtin_add_overflow(total, (s->size + page - 1) / page * page, &total) ||
		    total > SIZE_MAX) {
			host->set_error("%s: the shards' sizes add up past the address space",
					s->path);
			return false;
		}
	}
	f->map = mmap(NULL, (size_t)total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		      -1, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		host->set_error("%s: cannot reserve %" PRIu64 " bytes of address space: %s",
				f->shards[0].path, total, strerror(errno));
		return false;
	}
	f->map_size = (size_t)total;
	at = f->map;
	for (int i = 0; i < f->n_shards; i++) {
		st_shard *s = &f->shards[i];

		if (mmap(at, (size_t)s->size, PROT_READ, MAP_PRIVATE | MAP_FIXED, s->fd, 0) ==
		    MAP_FAILED) {
			host->set_error("%s: cannot map %" PRIu64 " bytes: %s", s->path, s->size,
					strerror(errno));
			return false;
		}
		s->base = at;
		at += (s->size + page - 1) / page * page;
		/* The mapping outlives the descriptor. */
		close(s->fd);
		s->fd = -1;
	}
	return true;
}

/* Each shard's header, then all their tensors in one table. */
static bool read_headers(const loom_host *host, st_file *f)
{
	uint64_t n = 0;

	for (int i = 0; i < f->n_shards; i++) {
		st_shard *s = &f->shards[i];

		if (!st_header_read(host, s->path, s->base, s->size, &s->header))
			return false;
		n += s->header.n;
	}
	f->tensors = calloc(n ? n : 1, sizeof(*f->tensors));
	if (f->tensors == NULL) {
		host->set_error("%s: out of memory for %" PRIu64 " tensors", f->shards[0].path, n);
		return false;
	}
	for (int i = 0; i < f->n_shards; i++) {
		memcpy(f->tensors + f->n_tensors, f->shards[i].header.tensors,
		       f->shards[i].header.n * sizeof(*f->tensors));
		f->n_tensors += f->shards[i].header.n;
	}
	return true;
}

/* A tensor of the gathered table and the shard it came from. */
typedef struct st_placed {
	loom_string name;
	int shard;
} st_placed;

static int compare_names(loom_string a, loom_string b)
{
	int c = memcmp(a.data, b.data, a.len < b.len ? a.len : b.len);

	return c != 0 ? c : (a.len > b.len) - (a.len < b.len);
}

static int by_name(const void *a, const void *b)
{
	return compare_names(((const st_placed *)a)->name, ((const st_placed *)b)->name);
}

/* Equal names in shard order, so that messages do not depend on qsort. */
static int by_name_then_shard(const void *a, const void *b)
{
	const st_placed *x = a, *y = b;
	int c = compare_names(x->name, y->name);

	return c != 0 ? c : (x->shard > y->shard) - (x->shard < y->shard);
}

/* Every tensor name once: within one header (JSON keeps repeated keys)
 * and across shards. placed is sorted by name. */
static bool check_duplicates(const loom_host *host, const st_file *f, const st_placed *placed)
{
	for (uint64_t i = 1; i < f->n_tensors; i++) {
		const st_placed *a = &placed[i - 1], *b = &placed[i];

		if (compare_names(a->name, b->name) != 0)
			continue;
		if (a->shard == b->shard)
			host->set_error("%s: tensor " ST_NAME_FMT " appears twice in the header",
					f->shards[a->shard].path, a->name.data);
		else
			host->set_error("%s: tensor " ST_NAME_FMT " is in two shards, %s and %s",
					f->shards[a->shard].path, a->name.data,
					f->shards[a->shard].path, f->shards[b->shard].path);
		return false;
	}
	return true;
}

/* Each tensor of the weight_map lies in the shard it names. Tensors the
 * index leaves out are kept: the shard's header is the authority. */
static bool check_index(const loom_host *host, const char *index_path, const st_index *index,
			const st_file *f, const st_placed *placed)
{
	for (uint64_t i = 0; i < index->n_entries; i++) {
		const st_index_entry *e = &index->entries[i];
		st_placed key = {{strlen(e->tensor), e->tensor}, 0};
		const st_placed *found = bsearch(&key, placed, f->n_tensors, sizeof(*placed), by_name);

		if (found == NULL || found->shard != e->shard) {
			host->set_error("%s: weight_map places tensor " ST_NAME_FMT
					" in %s, which does not hold it%s%s",
					index_path, e->tensor, index->shards[e->shard],
					found != NULL ? "; it is in " : "",
					found != NULL ? index->shards[found->shard] : "");
			return false;
		}
	}
	return true;
}

static bool check_tensors(const loom_host *host, const st_layout *layout, const st_index *index,
			  const st_file *f)
{
	st_placed *placed = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof(*placed));
	uint64_t k = 0;
	bool ok;

	if (placed == NULL) {
		host->set_error("%s: out of memory", layout->weights);
		return false;
	}
	for (int i = 0; i < f->n_shards; i++) {
		for (uint64_t j = 0; j < f->shards[i].header.n; j++) {
			placed[k].name = f->shards[i].header.tensors[j].name;
			placed[k++].shard = i;
		}
	}
	qsort(placed, f->n_tensors, sizeof(*placed), by_name_then_shard);
	ok = check_duplicates(host, f, placed) &&
	     (!layout->sharded || check_index(host, layout->weights, index, f, placed));
	free(placed);
	return ok;
}

/* general.name is the directory's name, as a model hub would show it. */
static bool put_name(const loom_host *host, const char *dir, st_meta *meta)
{
	char real[PATH_MAX];
	const char *name = realpath(dir, real) != NULL ? real : dir;
	const char *slash = strrchr(name, '/');

	if (slash != NULL && slash[1] != '\0')
		name = slash + 1;
	if (!st_meta_set_string(meta, "general.name", name, strlen(name))) {
		host->set_error("%s: out of memory", dir);
		return false;
	}
	return true;
}

/* config.json first: the tokenizer reads bos/eos_token_id from it. */
static bool read_meta(const loom_host *host, const st_layout *layout, st_file *f)
{
	return st_config_load(host, layout->dir, &f->meta) &&
	       put_name(host, layout->dir, &f->meta) &&
	       st_tokenizer_load(host, layout->dir, &f->meta);
}

static void publish(const st_layout *layout, st_file *f)
{
	if (layout->sharded)
		snprintf(f->format, sizeof(f->format), "safetensors (%d shard%s)", f->n_shards,
			 f->n_shards == 1 ? "" : "s");
	else
		snprintf(f->format, sizeof(f->format), "safetensors");
	f->pub.struct_size = sizeof(f->pub);
	f->pub.format = f->format;
	f->pub.n_meta = f->meta.n;
	f->pub.meta = f->meta.kv;
	f->pub.n_tensors = f->n_tensors;
	f->pub.tensors = f->tensors;
	f->pub.mapping = f->map;
	f->pub.mapping_size = f->map_size;
}

loom_model_file *st_open(const loom_host *host, const char *path)
{
	st_file *f = calloc(1, sizeof(*f));
	st_index index = {0};
	st_layout layout;
	char why[256];
	bool ok;

	if (f == NULL) {
		host->set_error("%s: out of memory", path);
		return NULL;
	}
	ok = st_layout_find(path, &layout, why, sizeof(why));
	if (!ok)
		host->set_error("%s: %s", path, why);
	ok = ok && (!layout.sharded || st_index_load(host, layout.weights, &index)) &&
	     list_shards(host, &layout, &index, f) && map_shards(host, f) &&
	     read_headers(host, f) && check_tensors(host, &layout, &index, f) &&
	     read_meta(host, &layout, f);
	if (ok)
		publish(&layout, f);
	else
		st_close(&f->pub);
	st_index_free(&index);
	return ok ? &f->pub : NULL;
}

/* Frees whatever open got as far as making. */
/* The shards' pages stay in the page cache: a later touch, or the next
 * start, reads them from there. */
void st_release(loom_model_file *file, const void *data, uint64_t n)
{
	st_file *f = (st_file *)file;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), map = (uintptr_t)f->map, at = (uintptr_t)data;

	if (f->map == NULL || at < map || n > f->map_size || at - map > f->map_size - n)
		return;
	uintptr_t lo = (at + page - 1) / page * page, hi = (at + n) / page * page;
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void st_close(loom_model_file *file)
{
	st_file *f = (st_file *)file;

	if (f == NULL)
		return;
	st_meta_free(&f->meta);
	free(f->tensors);
	if (f->map != NULL)
		munmap(f->map, f->map_size);
	for (int i = 0; i < f->n_shards; i++) {
		st_header_free(&f->shards[i].header);
		if (f->shards[i].fd >= 0)
			close(f->shards[i].fd);
	}
	free(f->shards);
	free(f);
}
