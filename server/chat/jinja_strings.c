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

int32_t jj_utf8_decode(const char *p, size_t n, size_t *len)
{
    return decode(p, n, len);
}

/* Code points Unicode 15.0 assigned: unassigned (Cn, so not printable) in the Unicode 14.0
 * database of the Python (3.11) the reference renders with, assigned in utf8proc 2.8's. */
static const int32_t unicode15_new[][2] = {
    {0xCF3, 0xCF3}, {0xECE, 0xECE}, {0x10EFD, 0x10EFF}, {0x1123F, 0x11241},
    {0x11B00, 0x11B09}, {0x11F00, 0x11F10}, {0x11F12, 0x11F3A}, {0x11F3E, 0x11F59},
    {0x1342F, 0x1342F}, {0x13440, 0x13455}, {0x1B132, 0x1B132}, {0x1B155, 0x1B155},
    {0x1D2C0, 0x1D2D3}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F},
    {0x1E4D0, 0x1E4F9}, {0x1F6DC, 0x1F6DC}, {0x1F774, 0x1F776}, {0x1F77B, 0x1F77F},
    {0x1F7D9, 0x1F7D9}, {0x1FA75, 0x1FA77}, {0x1FA87, 0x1FA88}, {0x1FAAD, 0x1FAAF},
    {0x1FABB, 0x1FABD}, {0x1FABF, 0x1FABF}, {0x1FACE, 0x1FACF}, {0x1FADA, 0x1FADB},
    {0x1FAE8, 0x1FAE8}, {0x1FAF7, 0x1FAF8}, {0x2B739, 0x2B739}, {0x31350, 0x323AF},
};

/* The general category in Python 3.11's Unicode 14.0 database */
static utf8proc_category_t category(int32_t cp)
{
    if (cp >= 0xCF3)
        for (size_t i = 0; i < sizeof unicode15_new / sizeof *unicode15_new; i++)
            if (cp >= unicode15_new[i][0] && cp <= unicode15_new[i][1])
                return UTF8PROC_CATEGORY_CN;
    return utf8proc_category(cp);
}

bool jj_cp_printable(int32_t cp)
{
    if (cp == ' ')
        return true;
    /* Python's str.isprintable: not Cc, Cf, Cs, Co, Cn, Zl, Zp or Zs */
    switch (category(cp)) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
        return false;
    default:
        return true;
    }
}

/* ---- Python 3.11's character classes (Unicode 14.0) ------------------------------------- */

struct cp_range {
    int32_t lo, hi;
};

static bool in_ranges(const struct cp_range *r, size_t n, int32_t cp)
{
    for (size_t i = 0; i < n; i++)
        if (cp >= r[i].lo && cp <= r[i].hi)
            return true;
    return false;
}

/* Numeric_Type Digit outside category Nd (superscripts, circled digits ...): str.isdigit */
static const struct cp_range digit_not_nd[] = {
    {0xB2, 0xB3}, {0xB9, 0xB9}, {0x1369, 0x1371}, {0x19DA, 0x19DA}, {0x2070, 0x2070},
    {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2460, 0x2468}, {0x2474, 0x247C}, {0x2488, 0x2490},
    {0x24EA, 0x24EA}, {0x24F5, 0x24FD}, {0x24FF, 0x24FF}, {0x2776, 0x277E}, {0x2780, 0x2788},
    {0x278A, 0x2792}, {0x10A40, 0x10A43}, {0x10E60, 0x10E68}, {0x11052, 0x1105A},
    {0x1F100, 0x1F10A},
};

/* Other_Lowercase and Other_Uppercase: lower or upper case outside Ll and Lu */
static const struct cp_range other_lower[] = {
    {0xAA, 0xAA}, {0xBA, 0xBA}, {0x2B0, 0x2B8}, {0x2C0, 0x2C1}, {0x2E0, 0x2E4}, {0x345, 0x345},
    {0x37A, 0x37A}, {0x1D2C, 0x1D6A}, {0x1D78, 0x1D78}, {0x1D9B, 0x1DBF}, {0x2071, 0x2071},
    {0x207F, 0x207F}, {0x2090, 0x209C}, {0x2170, 0x217F}, {0x24D0, 0x24E9}, {0x2C7C, 0x2C7D},
    {0xA69C, 0xA69D}, {0xA770, 0xA770}, {0xA7F8, 0xA7F9}, {0xAB5C, 0xAB5F}, {0x10780, 0x10780},
    {0x10783, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA},
};
static const struct cp_range other_upper[] = {
    {0x2160, 0x216F}, {0x24B6, 0x24CF}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169},
    {0x1F170, 0x1F189},
};

#define N_RANGES(r) (sizeof r / sizeof *r)

bool jj_cp_class(int32_t cp, enum jj_cp_class k)
{
    utf8proc_category_t cat = category(cp);
    bool alpha = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
                 cat == UTF8PROC_CATEGORY_LT || cat == UTF8PROC_CATEGORY_LM ||
                 cat == UTF8PROC_CATEGORY_LO;
    switch (k) {
    case JJ_CP_ALPHA: return alpha;
    case JJ_CP_DIGIT:
        return cat == UTF8PROC_CATEGORY_ND || in_ranges(digit_not_nd, N_RANGES(digit_not_nd), cp);
    case JJ_CP_ALNUM:
        /* alpha, decimal, digit or numeric: every Nl and No is numeric */
        return alpha || cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
               cat == UTF8PROC_CATEGORY_NO;
    case JJ_CP_WORD: return cp == '_' || jj_cp_class(cp, JJ_CP_ALNUM);
    case JJ_CP_LOWER:
        return cat == UTF8PROC_CATEGORY_LL || in_ranges(other_lower, N_RANGES(other_lower), cp);
    case JJ_CP_UPPER:
        return cat == UTF8PROC_CATEGORY_LU || in_ranges(other_upper, N_RANGES(other_upper), cp);
    case JJ_CP_TITLE: return cat == UTF8PROC_CATEGORY_LT;
    case JJ_CP_SPACE: return cp_space(cp);
    }
    return false;
}

/* Python's line boundaries: \n \r \r\n \v \f \x1c \x1d \x1e \x85 U+2028 U+2029 */
static size_t line_break(const char *p, size_t n)
{
    unsigned char ch = (unsigned char)p[0];
    if (ch == '\r')
        return n > 1 && p[1] == '\n' ? 2 : 1;
    if (ch == '\n' || ch == 0x0B || ch == 0x0C || (ch >= 0x1C && ch <= 0x1E))
        return 1;
    if (ch == 0xC2 && n > 1 && (unsigned char)p[1] == 0x85)
        return 2;
    if (ch == 0xE2 && n > 2 && (unsigned char)p[1] == 0x80 &&
        ((unsigned char)p[2] == 0xA8 || (unsigned char)p[2] == 0xA9))
        return 3;
    return 0;
}

struct jj_list *jj_splitlines(struct jj_ctx *c, struct jj_str s)
{
    struct jj_list *l = jj_list_new(c, 0);
    size_t start = 0;
    for (size_t i = 0; i < s.n;) {
        size_t br = line_break(s.p + i, s.n - i);
        if (!br) {
            i++;
            continue;
        }
        jj_list_push(c, l, jj_str(s.p + start, i - start));
        i += br;
        start = i;
    }
    if (start < s.n)
        jj_list_push(c, l, jj_str(s.p + start, s.n - start));
    return l;
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

/* ---- case mapping ------------------------------------------------------------------------ */

/* Python's full case mappings where they are more than one code point (SpecialCasing.txt's
 * unconditional entries, as Python 3.11's str.upper, lower and title apply them); every other
 * code point maps through utf8proc's simple mappings, which equal Python's. */
struct full_case {
    int32_t cp;
    int32_t to[3];
};

static const struct full_case full_upper[] = {
    {0xDF, {0x53, 0x53}}, {0x149, {0x2BC, 0x4E}}, {0x1F0, {0x4A, 0x30C}},
    {0x390, {0x399, 0x308, 0x301}}, {0x3B0, {0x3A5, 0x308, 0x301}}, {0x587, {0x535, 0x552}},
    {0x1E96, {0x48, 0x331}}, {0x1E97, {0x54, 0x308}}, {0x1E98, {0x57, 0x30A}},
    {0x1E99, {0x59, 0x30A}}, {0x1E9A, {0x41, 0x2BE}}, {0x1F50, {0x3A5, 0x313}},
    {0x1F52, {0x3A5, 0x313, 0x300}}, {0x1F54, {0x3A5, 0x313, 0x301}},
    {0x1F56, {0x3A5, 0x313, 0x342}}, {0x1F80, {0x1F08, 0x399}}, {0x1F81, {0x1F09, 0x399}},
    {0x1F82, {0x1F0A, 0x399}}, {0x1F83, {0x1F0B, 0x399}}, {0x1F84, {0x1F0C, 0x399}},
    {0x1F85, {0x1F0D, 0x399}}, {0x1F86, {0x1F0E, 0x399}}, {0x1F87, {0x1F0F, 0x399}},
    {0x1F88, {0x1F08, 0x399}}, {0x1F89, {0x1F09, 0x399}}, {0x1F8A, {0x1F0A, 0x399}},
    {0x1F8B, {0x1F0B, 0x399}}, {0x1F8C, {0x1F0C, 0x399}}, {0x1F8D, {0x1F0D, 0x399}},
    {0x1F8E, {0x1F0E, 0x399}}, {0x1F8F, {0x1F0F, 0x399}}, {0x1F90, {0x1F28, 0x399}},
    {0x1F91, {0x1F29, 0x399}}, {0x1F92, {0x1F2A, 0x399}}, {0x1F93, {0x1F2B, 0x399}},
    {0x1F94, {0x1F2C, 0x399}}, {0x1F95, {0x1F2D, 0x399}}, {0x1F96, {0x1F2E, 0x399}},
    {0x1F97, {0x1F2F, 0x399}}, {0x1F98, {0x1F28, 0x399}}, {0x1F99, {0x1F29, 0x399}},
    {0x1F9A, {0x1F2A, 0x399}}, {0x1F9B, {0x1F2B, 0x399}}, {0x1F9C, {0x1F2C, 0x399}},
    {0x1F9D, {0x1F2D, 0x399}}, {0x1F9E, {0x1F2E, 0x399}}, {0x1F9F, {0x1F2F, 0x399}},
    {0x1FA0, {0x1F68, 0x399}}, {0x1FA1, {0x1F69, 0x399}}, {0x1FA2, {0x1F6A, 0x399}},
    {0x1FA3, {0x1F6B, 0x399}}, {0x1FA4, {0x1F6C, 0x399}}, {0x1FA5, {0x1F6D, 0x399}},
    {0x1FA6, {0x1F6E, 0x399}}, {0x1FA7, {0x1F6F, 0x399}}, {0x1FA8, {0x1F68, 0x399}},
    {0x1FA9, {0x1F69, 0x399}}, {0x1FAA, {0x1F6A, 0x399}}, {0x1FAB, {0x1F6B, 0x399}},
    {0x1FAC, {0x1F6C, 0x399}}, {0x1FAD, {0x1F6D, 0x399}}, {0x1FAE, {0x1F6E, 0x399}},
    {0x1FAF, {0x1F6F, 0x399}}, {0x1FB2, {0x1FBA, 0x399}}, {0x1FB3, {0x391, 0x399}},
    {0x1FB4, {0x386, 0x399}}, {0x1FB6, {0x391, 0x342}}, {0x1FB7, {0x391, 0x342, 0x399}},
    {0x1FBC, {0x391, 0x399}}, {0x1FC2, {0x1FCA, 0x399}}, {0x1FC3, {0x397, 0x399}},
    {0x1FC4, {0x389, 0x399}}, {0x1FC6, {0x397, 0x342}}, {0x1FC7, {0x397, 0x342, 0x399}},
    {0x1FCC, {0x397, 0x399}}, {0x1FD2, {0x399, 0x308, 0x300}}, {0x1FD3, {0x399, 0x308, 0x301}},
    {0x1FD6, {0x399, 0x342}}, {0x1FD7, {0x399, 0x308, 0x342}}, {0x1FE2, {0x3A5, 0x308, 0x300}},
    {0x1FE3, {0x3A5, 0x308, 0x301}}, {0x1FE4, {0x3A1, 0x313}}, {0x1FE6, {0x3A5, 0x342}},
    {0x1FE7, {0x3A5, 0x308, 0x342}}, {0x1FF2, {0x1FFA, 0x399}}, {0x1FF3, {0x3A9, 0x399}},
    {0x1FF4, {0x38F, 0x399}}, {0x1FF6, {0x3A9, 0x342}}, {0x1FF7, {0x3A9, 0x342, 0x399}},
    {0x1FFC, {0x3A9, 0x399}}, {0xFB00, {0x46, 0x46}}, {0xFB01, {0x46, 0x49}},
    {0xFB02, {0x46, 0x4C}}, {0xFB03, {0x46, 0x46, 0x49}}, {0xFB04, {0x46, 0x46, 0x4C}},
    {0xFB05, {0x53, 0x54}}, {0xFB06, {0x53, 0x54}}, {0xFB13, {0x544, 0x546}},
    {0xFB14, {0x544, 0x535}}, {0xFB15, {0x544, 0x53B}}, {0xFB16, {0x54E, 0x546}},
    {0xFB17, {0x544, 0x53D}},
};
static const struct full_case full_lower[] = {
    {0x130, {0x69, 0x307}},
};
static const struct full_case full_title[] = {
    {0xDF, {0x53, 0x73}}, {0x149, {0x2BC, 0x4E}}, {0x1F0, {0x4A, 0x30C}},
    {0x390, {0x399, 0x308, 0x301}}, {0x3B0, {0x3A5, 0x308, 0x301}}, {0x587, {0x535, 0x582}},
    {0x1E96, {0x48, 0x331}}, {0x1E97, {0x54, 0x308}}, {0x1E98, {0x57, 0x30A}},
    {0x1E99, {0x59, 0x30A}}, {0x1E9A, {0x41, 0x2BE}}, {0x1F50, {0x3A5, 0x313}},
    {0x1F52, {0x3A5, 0x313, 0x300}}, {0x1F54, {0x3A5, 0x313, 0x301}},
    {0x1F56, {0x3A5, 0x313, 0x342}}, {0x1FB2, {0x1FBA, 0x345}}, {0x1FB4, {0x386, 0x345}},
    {0x1FB6, {0x391, 0x342}}, {0x1FB7, {0x391, 0x342, 0x345}}, {0x1FC2, {0x1FCA, 0x345}},
    {0x1FC4, {0x389, 0x345}}, {0x1FC6, {0x397, 0x342}}, {0x1FC7, {0x397, 0x342, 0x345}},
    {0x1FD2, {0x399, 0x308, 0x300}}, {0x1FD3, {0x399, 0x308, 0x301}}, {0x1FD6, {0x399, 0x342}},
    {0x1FD7, {0x399, 0x308, 0x342}}, {0x1FE2, {0x3A5, 0x308, 0x300}},
    {0x1FE3, {0x3A5, 0x308, 0x301}}, {0x1FE4, {0x3A1, 0x313}}, {0x1FE6, {0x3A5, 0x342}},
    {0x1FE7, {0x3A5, 0x308, 0x342}}, {0x1FF2, {0x1FFA, 0x345}}, {0x1FF4, {0x38F, 0x345}},
    {0x1FF6, {0x3A9, 0x342}}, {0x1FF7, {0x3A9, 0x342, 0x345}}, {0xFB00, {0x46, 0x66}},
    {0xFB01, {0x46, 0x69}}, {0xFB02, {0x46, 0x6C}}, {0xFB03, {0x46, 0x66, 0x69}},
    {0xFB04, {0x46, 0x66, 0x6C}}, {0xFB05, {0x53, 0x74}}, {0xFB06, {0x53, 0x74}},
    {0xFB13, {0x544, 0x576}}, {0xFB14, {0x544, 0x565}}, {0xFB15, {0x544, 0x56B}},
    {0xFB16, {0x54E, 0x576}}, {0xFB17, {0x544, 0x56D}},
};

static const struct full_case *full_find(const struct full_case *t, size_t n, int32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t[mid].cp == cp)
            return &t[mid];
        if (t[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool cp_cased(int32_t cp)
{
    return jj_cp_class(cp, JJ_CP_LOWER) || jj_cp_class(cp, JJ_CP_UPPER) ||
           jj_cp_class(cp, JJ_CP_TITLE);
}

/* Unicode Case_Ignorable: Mn, Me, Cf, Lm, Sk and the word-break MidLetter/MidNumLet/
 * Single_Quote characters */
static bool cp_case_ignorable(int32_t cp)
{
    static const int32_t mid[] = {0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,
                                  0x5F4,  0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                  0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
    switch (category(cp)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
        return true;
    default:
        for (size_t i = 0; i < sizeof mid / sizeof *mid; i++)
            if (mid[i] == cp)
                return true;
        return false;
    }
}

enum case_to { TO_LOWER, TO_UPPER, TO_TITLE };

/* Appends cp mapped to out (at most 3 code points, 12 bytes). cps[lo, hi) is the string the
 * final-sigma rule looks at, i the index of cp in it. */
static size_t map_cp(const int32_t *cps, size_t lo, size_t hi, size_t i, enum case_to to,
                     char *out)
{
    int32_t cp = cps[i];
    const struct full_case *f = NULL;
    int32_t one;
    if (to == TO_LOWER && cp == 0x3A3) {
        /* final sigma: a cased letter before (case-ignorables skipped), none after */
        size_t j = i;
        while (j > lo && cp_case_ignorable(cps[j - 1]))
            j--;
        bool final = j > lo && cp_cased(cps[j - 1]);
        if (final) {
            j = i + 1;
            while (j < hi && cp_case_ignorable(cps[j]))
                j++;
            final = j == hi || !cp_cased(cps[j]);
        }
        one = final ? 0x3C2 : 0x3C3;
    } else if (to == TO_UPPER) {
        f = full_find(full_upper, sizeof full_upper / sizeof *full_upper, cp);
        one = utf8proc_toupper(cp);
    } else if (to == TO_TITLE) {
        f = full_find(full_title, sizeof full_title / sizeof *full_title, cp);
        one = utf8proc_totitle(cp);
    } else {
        f = full_find(full_lower, sizeof full_lower / sizeof *full_lower, cp);
        one = utf8proc_tolower(cp);
    }
    size_t k = 0;
    if (f) {
        for (int m = 0; m < 3 && f->to[m]; m++)
            k += (size_t)utf8proc_encode_char(f->to[m], (utf8proc_uint8_t *)out + k);
    } else {
        k = (size_t)utf8proc_encode_char(one, (utf8proc_uint8_t *)out);
    }
    return k;
}

static bool jinja_word_sep(int32_t cp)
{
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || cp_space(cp);
}

/* mode: 0 lower, 1 upper, 2 Jinja's title filter, 3 capitalize, 4 Python's str.title */
struct jj_value jj_str_case(struct jj_ctx *c, struct jj_str s, int mode)
{
    /* decode once: the final-sigma rule looks both ways */
    int32_t *cps = jj_alloc(c, (s.n + 1) * sizeof *cps);
    size_t *lens = jj_alloc(c, (s.n + 1) * sizeof *lens);
    size_t n = 0;
    for (size_t i = 0; i < s.n; n++) {
        cps[n] = jj_utf8_decode(s.p + i, s.n - i, &lens[n]);
        i += lens[n];
    }
    char *o = jj_alloc(c, s.n * 3 + 1); /* a mapping at most triples a code point's bytes */
    size_t k = 0, at = 0, word = 0, word_end = 0;
    bool prev_cased = false;
    for (size_t i = 0; i < n; at += lens[i], i++) {
        enum case_to to = TO_LOWER;
        size_t lo = 0, hi = n;
        switch (mode) {
        case 0: to = TO_LOWER; break;
        case 1: to = TO_UPPER; break;
        case 2:
            /* re.split(r"([-\s\(\{\[\<]+)"), then item[0].upper() + item[1:].lower() */
            if (i == word_end) {
                word = i;
                bool sep = jinja_word_sep(cps[i]);
                word_end = i + 1;
                while (word_end < n && jinja_word_sep(cps[word_end]) == sep)
                    word_end++;
            }
            to = i == word ? TO_UPPER : TO_LOWER;
            lo = word + 1;
            hi = word_end;
            break;
        case 3: to = i == 0 ? TO_TITLE : TO_LOWER; break;
        default:
            to = prev_cased ? TO_LOWER : TO_TITLE;
            prev_cased = cp_cased(cps[i]);
            break;
        }
        if (lens[i] == 1 && (unsigned char)s.p[at] >= 0x80)
            o[k++] = s.p[at]; /* an invalid byte stays */
        else
            k += map_cp(cps, lo, hi, i, to, o + k);
    }
    return jj_str(o, k);
}

bool jj_str_all_case(struct jj_str s, bool upper)
{
    bool cased = false;
    for (size_t i = 0; i < s.n;) {
        size_t len;
        int32_t cp = jj_utf8_decode(s.p + i, s.n - i, &len);
        i += len;
        if (jj_cp_class(cp, upper ? JJ_CP_LOWER : JJ_CP_UPPER) || jj_cp_class(cp, JJ_CP_TITLE))
            return false;
        cased |= jj_cp_class(cp, upper ? JJ_CP_UPPER : JJ_CP_LOWER);
    }
    return cased;
}
