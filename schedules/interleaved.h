/* interleaved.h: interleaved 1F1B's lists (internal to schedules/; the
 * schedule and its ordering rules are described in schedule.h). */
#ifndef PZ_SCHEDULES_INTERLEAVED_H
#define PZ_SCHEDULES_INTERLEAVED_H

#include "schedules/schedule.h"

/* Rank `stage`'s warm-up forwards: min(2(S-r-1) + (V-1)S, mV); V = 1:
 * min(S-r-1, m). */
int pz_interleaved_warmup(int stage, int nstages, int nmicro, int nchunks);

/* Appends rank `stage`'s forwards, backwards, sends and receives to s->ins
 * (room for 6 m V more) and sets s->warmup, steady, cooldown. Arguments are
 * checked by the caller. PZ_ERR_SHAPE if the edge order cannot be met (a bug). */
pz_status pz_interleaved_fill(pz_schedule *s, int stage, int nstages, int nmicro, int nchunks);

#endif
