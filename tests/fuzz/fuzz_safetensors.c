/* fuzz_safetensors.c - the safetensors plugin's header reader and shard
 * index reader (formats/safetensors, linked in) on arbitrary bytes. Every
 * input goes to both: as a whole .safetensors file and as
 * model.safetensors.index.json. */
#include "fuzz_support.h"
#include "st_header.h"
#include "st_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const loom_host *host = fuzz_host();
	st_header header;
	if (st_header_read(host, "input.safetensors", data, size, &header))
		st_header_free(&header);

	st_index index;
	if (st_index_load(host, fuzz_write_file("model.safetensors.index.json", data, size), &index))
		st_index_free(&index);
	return 0;
}
