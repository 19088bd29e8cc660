/* clock.h - a monotonic clock for the timings -v reports. */
#ifndef LOOM_CLOCK_H
#define LOOM_CLOCK_H

/* Seconds since an arbitrary point, monotonic. */
double loom_now_s(void);

#endif
