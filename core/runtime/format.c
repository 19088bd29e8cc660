/* format.c - the one door to the format plugins. */
#include "runtime/format.h"

#include "runtime/error.h"
#include "runtime/host.h"
#include "runtime/log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes of a file's head that the probes see. */
#define PROBE_HEAD_BYTES 4096

static const loom_format_vtable *vtable(const loom_plugin *p)
{
	return p->desc->vtable;
}

static bool usable_format(const loom_plugin *p)
{
	return p->kind == LOOM_PLUGIN_FORMAT && p->desc != NULL;
}

const char *loom_format_missing_slot(const loom_format_vtable *vt)
{
	if (vt->open == NULL)
		return "open";
	if (vt->close == NULL)
		return "close";
	return NULL;
}

/* What open(2) could not be trusted with: a FIFO or a device would block
 * the probe's read, or never end. */
static const char *file_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

const loom_plugin *loom_format_choose(const loom_registry *reg, const char *path)
{
	unsigned char head[PROBE_HEAD_BYTES];
	ssize_t n = 0;
	struct stat st;
	if (stat(path, &st) != 0) {
		loom_error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		loom_error(LOOM_ERR_IO, "%s is %s; a model is a file or a directory", path, file_kind(st.st_mode));
		return NULL;
	}
	int fd = open(path, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, head, sizeof(head));
		close(fd);
	}
	loom_probe_args args = {
		.struct_size = sizeof(args),
		.host = loom_host_table(),
		.path = path,
		.head = head,
		.head_len = n > 0 ? (size_t)n : 0,
	};
	const loom_plugin *best = NULL;
	int best_score = 0;
	for (size_t i = 0; i < reg->n_plugins; i++) {
		const loom_plugin *p = &reg->plugins[i];
		if (!usable_format(p))
			continue;
		char why[256] = "";
		args.n_options = p->config->n_options;
		args.option_keys = (const char *const *)p->config->option_keys;
		args.option_values = (const char *const *)p->config->option_values;
		int score = p->desc->probe(&args, why, sizeof(why));
		loom_debug("format '%s' scores %d for %s%s%s", p->name, score, path, why[0] ? ": " : "", why);
		if (score > best_score) {
			best = p;
			best_score = score;
		}
	}
	if (best == NULL)
		loom_error(LOOM_ERR_BAD_FORMAT, "%s: no format plugin recognises this file", path);
	return best;
}

loom_status loom_format_open(const loom_plugin *p, const char *path, loom_model_file **out)
{
	const unsigned long serial = loom_error_serial();
	*out = vtable(p)->open(loom_host_table(), path);
	if (*out != NULL)
		return LOOM_OK;
	if (loom_error_serial() == serial)
		return loom_error(LOOM_ERR_BAD_FORMAT, "%s", path);
	return LOOM_ERR_BAD_FORMAT;
}

void loom_format_release(const loom_plugin *p, loom_model_file *file, const void *data, uint64_t n_bytes)
{
	if (file != NULL && LOOM_VT_HAS(vtable(p), release))
		vtable(p)->release(file, data, n_bytes);
}

void loom_format_close(const loom_plugin *p, loom_model_file *file)
{
	if (file != NULL)
		vtable(p)->close(file);
}

bool loom_format_writes(const loom_plugin *p)
{
	return LOOM_VT_HAS(vtable(p), write);
}

loom_status loom_format_write(const loom_plugin *p, const char *path, const loom_model_file *content)
{
	if (!loom_format_writes(p))
		return loom_error(LOOM_ERR_UNSUPPORTED, "format %s cannot write files", p->name);
	const unsigned long serial = loom_error_serial();
	loom_status st = vtable(p)->write(loom_host_table(), path, content);
	if (st != LOOM_OK && loom_error_serial() == serial)
		return loom_error(st, "format %s could not write %s", p->name, path);
	return st;
}

const char *loom_format_contract_section(const loom_plugin *p)
{
	return LOOM_VT_HAS(vtable(p), contract_section) ? vtable(p)->contract_section : NULL;
}

const loom_plugin *loom_format_writer(const loom_registry *reg, const char *section)
{
	for (size_t i = 0; i < reg->n_plugins; i++) {
		const loom_plugin *p = &reg->plugins[i];
		const char *own = usable_format(p) ? loom_format_contract_section(p) : NULL;
		if (own != NULL && strcmp(own, section) == 0 && loom_format_writes(p))
			return p;
	}
	return NULL;
}
