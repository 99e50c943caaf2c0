/* Parsing of the option units server.md defines: sizes, token counts, durations. */
#ifndef SPLASH_SERVER_UNITS_H
#define SPLASH_SERVER_UNITS_H

#include <stdint.h>

/* Bytes: a whole number, or a number (fraction allowed) with K, M or G in binary
 * units, any of "G", "GB", "GiB", "g"; the fraction is rounded down to whole bytes.
 * Returns 0 on success, -1 on a malformed value. */
int splash_parse_size(const char *s, uint64_t *bytes);
/* Tokens: a whole number, or one with K (1024) or M (1,000,000); fractions allowed
 * with a suffix, rounded down. */
int splash_parse_tokens(const char *s, uint64_t *tokens);
/* Seconds: a number, or one with an s, m or h suffix ("90s", "30m", "1.5h"). */
int splash_parse_duration(const char *s, double *seconds);

#endif
