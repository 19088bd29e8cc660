/* fuzz_gguf.c - the GGUF reader (formats/gguf, linked in) on arbitrary
 * files. What it opens it also writes back and reopens: the writer then
 * sees every metadata type and tensor table the reader accepts. */
#include "fuzz_support.h"
#include "gguf_reader.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const loom_host *host = fuzz_host();
	loom_model_file *file = gguf_open(host, fuzz_write_file("input.gguf", data, size));
	if (file == NULL)
		return 0;
	char copy[4096];
	snprintf(copy, sizeof(copy), "%s/copy.gguf", fuzz_write_file(NULL, NULL, 0));
	if (gguf_write(host, copy, file) == LOOM_OK) {
		/* What loom writes, loom must read. */
		loom_model_file *again = gguf_open(host, copy);
		if (again == NULL || again->n_tensors != file->n_tensors || again->n_meta != file->n_meta)
			abort();
		gguf_close(again);
	}
	gguf_close(file);
	return 0;
}
