/* The unit tests' one assertion: CHECK(cond) counts a pass or reports a failure on stderr,
 * with CHECK_DETAIL (a string the test defines before this include, e.g. the last error). */
#ifndef SLURM_STACK_TEST_CHECK_H
#define SLURM_STACK_TEST_CHECK_H

#include <stdio.h>

#ifndef CHECK_DETAIL
#define CHECK_DETAIL ""
#endif

static int passed, failed;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (cond) {                                                              \
			passed++;                                                        \
		} else {                                                                 \
			failed++;                                                        \
			fprintf(stderr, "%s:%d: FAILED: %s (%s)\n", __FILE__, __LINE__, #cond, \
				CHECK_DETAIL);                                           \
		}                                                                        \
	} while (0)

#endif
