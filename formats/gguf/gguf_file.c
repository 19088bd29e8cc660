/* gguf_file.c - opening a GGUF file: map it, parse it, hand out the tables. */
#include "gguf_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the plugin owns behind the loom_model_file it returns. */
typedef struct gguf_file {
	loom_model_file pub; /* first, so close() can convert back */
	void *map;
	size_t map_size;
	loom_meta_kv *meta;
	uint64_t n_meta;
	loom_file_tensor *tensors;
} gguf_file;

static bool map_fd(gguf_cursor *c, int fd, gguf_file *f)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		gguf_fail(c, "cannot stat: %s", strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		gguf_fail(c, "not a regular file");
		return false;
	}
	/* mmap cannot map zero bytes; say plainly what is wrong instead. */
	if (st.st_size == 0) {
		gguf_fail(c, "empty file (0 bytes), not a GGUF file");
		return false;
	}
	f->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (f->map == MAP_FAILED) {
		gguf_fail(c, "cannot map %" PRIu64 " bytes: %s", (uint64_t)st.st_size,
			  strerror(errno));
		return false;
	}
	f->map_size = (size_t)st.st_size;
	return true;
}

static bool map_file(gguf_cursor *c, const char *path, gguf_file *f)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0) {
		gguf_fail(c, "cannot open: %s", strerror(errno));
		return false;
	}
	/* The mapping outlives the descriptor. */
	ok = map_fd(c, fd, f);
	close(fd);
	return ok;
}

static bool check_count(gguf_cursor *c, uint64_t count, uint64_t min_bytes, const char *what,
			uint64_t at)
{
	if (count > gguf_left(c) / min_bytes) {
		gguf_fail(c, "%s %" PRIu64 " at offset %" PRIu64
			     " runs past the end of the file (%" PRIu64 " bytes): the %" PRIu64
			     " bytes after the header hold at most %" PRIu64,
			  what, count, at, c->size, gguf_left(c), gguf_left(c) / min_bytes);
		return false;
	}
	return true;
}

/* Magic, version and the two counts, each count bounded by what the rest of
 * the file could hold. */
static bool read_header(gguf_cursor *c, uint32_t *version, uint64_t *n_tensors, uint64_t *n_kv)
{
	const uint8_t *magic;

	gguf_set_where(c, "header");
	magic = gguf_take(c, 4, "magic");
	if (magic == NULL)
		return false;
	if (memcmp(magic, GGUF_MAGIC, 4) != 0) {
		gguf_fail(c, "not a GGUF file (magic at offset 0 is not \"" GGUF_MAGIC "\")");
		return false;
	}
	if (!gguf_read_u32(c, version, "version"))
		return false;
	if (!gguf_version_supported(*version)) {
		/* A big-endian file's version reads byte-swapped here. */
		bool swapped = gguf_version_supported(__builtin_bswap32(*version));

		gguf_fail(c, "GGUF version %" PRIu32
			     " at offset 4 is not supported (2 and 3 are)%s",
			  *version, swapped ? "; a big-endian file?" : "");
		return false;
	}
	if (!gguf_read_u64(c, n_tensors, "n_tensors") || !gguf_read_u64(c, n_kv, "n_kv"))
		return false;
	return check_count(c, *n_tensors, GGUF_MIN_TENSOR_BYTES, "n_tensors", 8) &&
	       check_count(c, *n_kv, GGUF_MIN_KV_BYTES, "n_kv", 16);
}

/* calloc of at least one element, so that an empty table is not mistaken
 * for a failed allocation. */
static void *alloc_table(gguf_cursor *c, uint64_t n, size_t size, const char *what)
{
	void *p = calloc(n > 0 ? n : 1, size);

	if (p == NULL)
		gguf_fail(c, "out of memory for %" PRIu64 " %s", n, what);
	return p;
}

static bool parse(gguf_cursor *c, gguf_file *f)
{
	uint32_t version, alignment;
	uint64_t n_tensors, data_start;

	if (!read_header(c, &version, &n_tensors, &f->n_meta))
		return false;
	f->meta = alloc_table(c, f->n_meta, sizeof(*f->meta), "keys");
	if (f->meta == NULL || !gguf_parse_meta(c, f->meta, f->n_meta, &alignment))
		return false;
	f->tensors = alloc_table(c, n_tensors, sizeof(*f->tensors), "tensors");
	if (f->tensors == NULL || !gguf_parse_tensor_infos(c, f->tensors, n_tensors, alignment))
		return false;
	/* The data section starts at the next multiple of the alignment. */
	data_start = (c->pos + alignment - 1) / alignment * alignment;
	if (!gguf_place_tensors(c, f->tensors, n_tensors, data_start))
		return false;

	f->pub.struct_size = sizeof(f->pub);
	f->pub.format = version == 2 ? "gguf v2" : "gguf v3";
	f->pub.n_meta = f->n_meta;
	f->pub.meta = f->meta;
	f->pub.n_tensors = n_tensors;
	f->pub.tensors = f->tensors;
	f->pub.mapping = f->map;
	f->pub.mapping_size = f->map_size;
	return true;
}

static void free_tables(gguf_file *f)
{
	free(f->tensors);
	if (f->meta != NULL)
		gguf_free_meta(f->meta, f->n_meta);
	free(f->meta);
}

loom_model_file *gguf_open(const loom_host *host, const char *path)
{
	gguf_cursor c;
	gguf_file *f;

	gguf_cursor_init(&c, host, path);
	f = calloc(1, sizeof(*f));
	if (f == NULL) {
		gguf_fail(&c, "out of memory");
		return NULL;
	}
	if (!map_file(&c, path, f))
		goto err_free;
	gguf_cursor_attach(&c, f->map, f->map_size);
	if (!parse(&c, f))
		goto err_tables;
	return &f->pub;

err_tables:
	free_tables(f);
	munmap(f->map, f->map_size);
err_free:
	free(f);
	return NULL;
}

/* The file's pages stay in the page cache: a later touch, or the next
 * start, reads them from there. */
void gguf_release(loom_model_file *file, const void *data, uint64_t n)
{
	gguf_file *f = (gguf_file *)file;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), map = (uintptr_t)f->map, at = (uintptr_t)data;

	if (at < map || n > f->map_size || at - map > f->map_size - n)
		return;
	uintptr_t lo = (at + page - 1) / page * page, hi = (at + n) / page * page;
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void gguf_close(loom_model_file *file)
{
	gguf_file *f = (gguf_file *)file;

	if (f == NULL)
		return;
	free_tables(f);
	munmap(f->map, f->map_size);
	free(f);
}
