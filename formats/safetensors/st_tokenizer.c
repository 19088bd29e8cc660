/* st_tokenizer.c - tokenizer.json to tokenizer.ggml.* keys. */
#include "st_tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool st_tokenizer_load(const loom_host *host, const char *dir, st_meta *meta)
{
	(void)meta;
	char path[4096];
	int n = snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		host->set_error("%s: path too long", dir);
		return false;
	}
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		if (errno == ENOENT)
			return true;
		host->set_error("%s: %s", path, strerror(errno));
		return false;
	}
	fclose(f);
	host->set_error("%s: tokenizer.json is not supported yet", path);
	return false;
}
