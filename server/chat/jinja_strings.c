/* UTF-8 string helpers with Python's rules: whitespace, strip, case mapping, length. */
#include <string.h>

#include <utf8proc.h>

#include "server/chat/jinja_internal.h"

/* Decodes one code point (invalid bytes read as themselves, length 1). */
static int32_t decode(const char *p, size_t n, size_t *len)
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t r = utf8proc_iterate((const utf8proc_uint8_t *)p, (utf8proc_ssize_t)n, &cp);
    if (r <= 0) {
        *len = 1;
        return (unsigned char)p[0];
    }
    *len = (size_t)r;
    return cp;
}

static bool cp_space(int32_t cp)
{
    /* Python's str.isspace: bidirectional class WS, B or S, or category Zs */
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E:
    case 0x1F: case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

bool jj_utf8_space(const char *p, size_t n, size_t *len)
{
    int32_t cp = decode(p, n, len);
    return cp_space(cp);
}

static bool in_chars(const struct jj_str *chars, const char *p, size_t len)
{
    for (size_t i = 0; i < chars->n;) {
        size_t cl;
        decode(chars->p + i, chars->n - i, &cl);
        if (cl == len && memcmp(chars->p + i, p, len) == 0)
            return true;
        i += cl;
    }
    return false;
}

/* Length of the code point that ends at s.p + end. */
static size_t last_cp_len(const char *p, size_t end)
{
    size_t k = 1;
    while (k < end && k < 4 && ((unsigned char)p[end - k] & 0xC0) == 0x80)
        k++;
    size_t len;
    decode(p + end - k, k, &len);
    return len == k ? k : 1;
}

struct jj_str jj_strip(struct jj_str s, const struct jj_str *chars, bool left, bool right)
{
    size_t b = 0, e = s.n;
    while (left && b < e) {
        size_t len;
        bool strip;
        if (chars) {
            decode(s.p + b, e - b, &len);
            strip = in_chars(chars, s.p + b, len);
        } else {
            strip = jj_utf8_space(s.p + b, e - b, &len);
        }
        if (!strip)
            break;
        b += len;
    }
    while (right && e > b) {
        size_t len = last_cp_len(s.p + b, e - b);
        size_t dl;
        bool strip = chars ? in_chars(chars, s.p + e - len, len)
                           : jj_utf8_space(s.p + e - len, len, &dl);
        if (!strip)
            break;
        e -= len;
    }
    return (struct jj_str){s.p + b, e - b};
}

size_t jj_utf8_count(struct jj_str s)
{
    size_t count = 0;
    for (size_t i = 0; i < s.n;) {
        size_t len;
        decode(s.p + i, s.n - i, &len);
        i += len;
        count++;
    }
    return count;
}

static bool cp_cased(int32_t cp)
{
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
           cat == UTF8PROC_CATEGORY_LT;
}

static bool jinja_word_sep(int32_t cp)
{
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || cp_space(cp);
}

/* mode: 0 lower, 1 upper, 2 Jinja's title filter, 3 capitalize, 4 Python's str.title */
struct jj_value jj_str_case(struct jj_ctx *c, struct jj_str s, int mode)
{
    char *o = jj_alloc(c, s.n * 2 + 1);
    size_t k = 0;
    bool prev_cased = false, at_word = true, first = true;
    for (size_t i = 0; i < s.n;) {
        size_t len;
        int32_t cp = decode(s.p + i, s.n - i, &len);
        int32_t m = cp;
        switch (mode) {
        case 0: m = utf8proc_tolower(cp); break;
        case 1: m = utf8proc_toupper(cp); break;
        case 2:
            /* re.split(r"([-\s\(\{\[\<]+)"): each piece's first char upper, the rest lower */
            if (jinja_word_sep(cp)) {
                m = at_word ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
                at_word = false;
                if (i + len < s.n) {
                    size_t nl;
                    int32_t next = decode(s.p + i + len, s.n - i - len, &nl);
                    at_word = !jinja_word_sep(next);
                }
            } else {
                m = at_word ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
                at_word = false;
            }
            break;
        case 3: m = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
        case 4:
            m = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
            prev_cased = cp_cased(cp);
            break;
        }
        first = false;
        if (m == cp || (len == 1 && (unsigned char)s.p[i] >= 0x80)) {
            memcpy(o + k, s.p + i, len);
            k += len;
        } else {
            k += (size_t)utf8proc_encode_char(m, (utf8proc_uint8_t *)o + k);
        }
        i += len;
    }
    return jj_str(o, k);
}
