/* cli_input.c - prompts and texts from -p, or from a file with -f (stdin
 * for -f -), read whole and kept with their length: a file's NUL bytes
 * and invalid UTF-8 reach the tokenizer, which defines what they become. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool read_all(int fd, cli_text *out)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap + 1);
	for (;;) {
		if (buf == NULL)
			return false;
		if (len == cap) {
			char *bigger = realloc(buf, cap * 2 + 1);
			if (bigger == NULL) {
				free(buf);
				return false;
			}
			buf = bigger;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;
			free(buf);
			errno = err;
			return false;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	out->bytes = buf;
	out->len = len;
	out->from_file = true;
	return true;
}

int cli_open_text_file(const char *cmd, const char *path)
{
	if (strcmp(path, "-") == 0)
		return STDIN_FILENO;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cli_fail("%s: cannot open %s: %s", cmd, path, strerror(errno)), -1;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return cli_fail("%s: %s is a directory, not a text file", cmd, path), -1;
	}
	return fd;
}

bool cli_read_file(const char *cmd, const char *path, cli_text *out)
{
	memset(out, 0, sizeof(*out));
	int fd = cli_open_text_file(cmd, path);
	if (fd < 0)
		return false;
	if (fd == STDIN_FILENO) {
		if (!read_all(STDIN_FILENO, out))
			return cli_fail("%s: cannot read standard input: %s", cmd, strerror(errno)), false;
		return true;
	}
	bool ok = read_all(fd, out);
	int err = errno;
	close(fd);
	if (!ok)
		return cli_fail("%s: cannot read %s: %s", cmd, path, strerror(err)), false;
	return true;
}

bool cli_read_text(const char *cmd, const cli_options *o, const char *what, cli_text *out)
{
	memset(out, 0, sizeof(*out));
	if (o->prompt != NULL && o->file != NULL)
		return cli_fail("%s: give the %s with -p or with -f, not both", cmd, what), false;
	if (o->file != NULL)
		return cli_read_file(cmd, o->file, out);
	if (o->prompt == NULL)
		return cli_fail("%s: no %s given (-p TEXT or -f FILE)", cmd, what), false;
	out->len = strlen(o->prompt);
	out->bytes = malloc(out->len + 1);
	if (out->bytes == NULL)
		return cli_fail("out of memory"), false;
	memcpy(out->bytes, o->prompt, out->len + 1);
	return true;
}

void cli_text_free(cli_text *t)
{
	free(t->bytes);
	t->bytes = NULL;
	t->len = 0;
}
