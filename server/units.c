/* Unit parsing for server options (server.md "Server options"). */
#include "server/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Splits "2.5G" into a non-negative number and its suffix; rejects signs, hex, inf, nan. */
static int split_number(const char *s, double *value, const char **suffix, int *has_fraction)
{
    if (!s || (!isdigit((unsigned char)s[0]) && s[0] != '.'))
        return -1;
    const char *p = s;
    while (isdigit((unsigned char)*p))
        p++;
    *has_fraction = 0;
    if (*p == '.') {
        *has_fraction = 1;
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        while (isdigit((unsigned char)*p))
            p++;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end != p || !isfinite(v) || v < 0)
        return -1;
    *value = v;
    *suffix = p;
    return 0;
}

int splash_parse_size(const char *s, uint64_t *bytes)
{
    double v;
    const char *suf;
    int frac;
    if (split_number(s, &v, &suf, &frac))
        return -1;
    double mult;
    if (!*suf) {
        if (frac)
            return -1; /* a plain byte count is whole */
        mult = 1;
    } else {
        char unit = (char)toupper((unsigned char)suf[0]);
        const char *rest = suf + 1;
        if (unit == 'K')
            mult = 1024.0;
        else if (unit == 'M')
            mult = 1024.0 * 1024.0;
        else if (unit == 'G')
            mult = 1024.0 * 1024.0 * 1024.0;
        else
            return -1;
        if (*rest && strcasecmp(rest, "B") && strcasecmp(rest, "iB"))
            return -1;
    }
    double b = floor(v * mult);
    if (b >= 18446744073709551615.0)
        return -1;
    *bytes = (uint64_t)b;
    return 0;
}

int splash_parse_tokens(const char *s, uint64_t *tokens)
{
    double v;
    const char *suf;
    int frac;
    if (split_number(s, &v, &suf, &frac))
        return -1;
    double mult;
    if (!*suf) {
        if (frac)
            return -1;
        mult = 1;
    } else if ((suf[0] == 'K' || suf[0] == 'k') && !suf[1]) {
        mult = 1024;
    } else if ((suf[0] == 'M' || suf[0] == 'm') && !suf[1]) {
        mult = 1000000;
    } else {
        return -1;
    }
    double t = floor(v * mult);
    if (t > 9.0e15)
        return -1;
    *tokens = (uint64_t)t;
    return 0;
}

int splash_parse_duration(const char *s, double *seconds)
{
    double v;
    const char *suf;
    int frac;
    if (split_number(s, &v, &suf, &frac))
        return -1;
    double mult = 1;
    if (*suf) {
        if (suf[1])
            return -1;
        if (suf[0] == 's')
            mult = 1;
        else if (suf[0] == 'm')
            mult = 60;
        else if (suf[0] == 'h')
            mult = 3600;
        else
            return -1;
    }
    *seconds = v * mult;
    return 0;
}
