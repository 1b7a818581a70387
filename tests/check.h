/* check.h: the CHECK macro shared by the codec tests. Counts every check,
 * counts and prints failures (the first CHECK_MAX_PRINTED of them), and
 * never stops the test, so one run reports every broken case. */
#ifndef PZ_TESTS_CHECK_H
#define PZ_TESTS_CHECK_H

#include <stdio.h>

#ifndef CHECK_MAX_PRINTED
#define CHECK_MAX_PRINTED 50
#endif

static int failures = 0, checks = 0;

#define CHECK(cond, ...)                                     \
    do {                                                     \
        checks++;                                            \
        if (!(cond)) {                                       \
            failures++;                                      \
            if (failures <= CHECK_MAX_PRINTED) {             \
                printf("FAIL %s:%d: ", __FILE__, __LINE__);  \
                printf(__VA_ARGS__);                         \
                printf("\n");                                \
            }                                                \
        }                                                    \
    } while (0)

#endif
