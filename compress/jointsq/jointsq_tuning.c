/* jointsq_tuning.c: the JointSQ solver's tuning (compress/jointsq/jointsq_priv.h), in a
 * file compiled once so every instruction-set level's copy reads the same. */
#include "compress/jointsq/jointsq_priv.h"

pz_jsq_tuning pz_jsq_tune = PZ_JSQ_TUNING_DEFAULT;
