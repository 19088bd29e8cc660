/* check_main.h - the main() of every Check binary: LOOM_TEST_MAIN(suite_fn). */
#ifndef LOOM_CHECK_MAIN_H
#define LOOM_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

#define LOOM_TEST_MAIN(make_suite)                                       \
	int main(void)                                                   \
	{                                                                \
		SRunner *runner = srunner_create(make_suite());          \
		srunner_run_all(runner, CK_NORMAL);                      \
		int failed = srunner_ntests_failed(runner);              \
		srunner_free(runner);                                    \
		return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;        \
	}

#endif
