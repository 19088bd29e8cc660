/* fuzz_hf_json.c - a Hugging Face checkpoint's config.json and
 * tokenizer.json as the safetensors plugin (linked in) turns them into
 * metadata. The input is written as both files of one directory: config.json
 * is read first, as when a checkpoint opens, and tokenizer.json then sees
 * whatever metadata it left. */
#include "fuzz_support.h"
#include "st_config.h"
#include "st_meta.h"
#include "st_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const loom_host *host = fuzz_host();
	fuzz_write_file("config.json", data, size);
	fuzz_write_file("tokenizer.json", data, size);
	const char *dir = fuzz_write_file(NULL, NULL, 0);

	st_meta meta = {0};
	st_config_load(host, dir, &meta);
	st_tokenizer_load(host, dir, &meta);
	st_meta_free(&meta);
	return 0;
}
