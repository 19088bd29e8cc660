/* fuzz_contract.c - the architecture contract reader (arch/NAME.yaml) on
 * arbitrary files. */
#include "fuzz_support.h"
#include "model/contract.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	loom_contract *contract;
	if (loom_contract_load(fuzz_write_file("fuzz.yaml", data, size), &contract) == LOOM_OK)
		loom_contract_free(contract);
	return 0;
}
