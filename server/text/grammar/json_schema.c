/* JSON Schema to grammar. Every supported keyword becomes grammar; any other
 * keyword that could constrain a value is refused with its path, so no schema
 * is silently loosened. Objects write their declared properties in schema
 * order (required ones always, optional ones or not); whitespace is bounded:
 * nothing, one space, or a line break and up to 32 spaces, at each place JSON
 * allows it. Numbers keep to what a 64-bit integer or a double holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/text/grammar/internal.h"

#define MAX_DEPTH 64
#define MAX_LENGTH_BOUND 32
#define MAX_ITEMS_BOUND 1024
#define MAX_INDENT 32
#define INT_DIGITS 18 /* |n| < 10^18 fits int64 */
#define FRAC_DIGITS 16
#define EXP_DIGITS 2

struct ref_memo {
    const json_t *target;
    uint32_t rule;
};

struct json_gen {
    struct gram_builder *b;
    const json_t *root;
    unsigned flags;
    struct ref_memo *refs;
    size_t n_refs, cap_refs;
    uint32_t r_ws, r_string, r_body, r_number, r_integer, r_value, r_bool, r_null;
    int depth;
};

static const char *const annotations[] = {
    "title",    "description",      "default",         "examples",  "$schema", "$id",
    "$comment", "deprecated",       "readOnly",        "writeOnly", "$defs",   "definitions",
    "$anchor",  "contentMediaType", "contentEncoding", "name",      "strict",  NULL,
};

static const char *const value_keywords[] = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "minLength",
    "maxLength",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    NULL,
};

static int in_list(const char *const *list, const char *k)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(list[i], k))
            return 1;
    return 0;
}

static uint32_t fail(enum splash_status *st, struct splash_err *err, enum splash_status code,
                     const char *path, const char *fmt, const char *arg)
{
    char what[160];
    snprintf(what, sizeof what, fmt, arg);
    splash_err_set(err, code, "%s: %s", path, what);
    *st = code;
    return GRAM_INF;
}

static void sub_path(char *out, size_t size, const char *path, const char *a, const char *b)
{
    if (b)
        snprintf(out, size, "%s.%s.%s", path, a, b);
    else
        snprintf(out, size, "%s.%s", path, a);
}

/* ==== shared rules ======================================================================== */

/* ws ::= "" | " " | "\n" spaces(0..MAX_INDENT) */
static uint32_t ws_rule(struct json_gen *j)
{
    if (j->r_ws != GRAM_INF)
        return j->r_ws;
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t ws = gram_rule_new(b);
    uint32_t sp[MAX_INDENT + 1];
    for (int i = 0; i <= MAX_INDENT; i++)
        sp[i] = gram_rule_new(b);
    for (int i = 0; i <= MAX_INDENT; i++) {
        gram_seq_reset(&s);
        gram_alt_add(b, sp[i], &s);
        if (i < MAX_INDENT) {
            gram_seq_byte(b, &s, ' ');
            gram_seq_ref(b, &s, sp[i + 1]);
            gram_alt_add(b, sp[i], &s);
        }
    }
    gram_seq_reset(&s);
    gram_alt_add(b, ws, &s);
    gram_seq_byte(b, &s, ' ');
    gram_alt_add(b, ws, &s);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '\n');
    gram_seq_ref(b, &s, sp[0]);
    gram_alt_add(b, ws, &s);
    gram_seq_free(&s);
    return j->r_ws = ws;
}

/* One character of a JSON string (or of raw text when raw), then next. UTF-8
 * is written out byte by byte, so a token may end inside a character. */
static void add_char_alts(struct json_gen *j, uint32_t rule, uint32_t next, int raw,
                          const struct gram_class *ascii)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    static const char *const multi[] = {
        "\xc2\xdf"
        "\x80\xbf",
        "\xe0\xe0"
        "\xa0\xbf"
        "\x80\xbf",
        "\xe1\xec"
        "\x80\xbf"
        "\x80\xbf",
        "\xed\xed"
        "\x80\x9f"
        "\x80\xbf",
        "\xee\xef"
        "\x80\xbf"
        "\x80\xbf",
        "\xf0\xf0"
        "\x90\xbf"
        "\x80\xbf"
        "\x80\xbf",
        "\xf1\xf3"
        "\x80\xbf"
        "\x80\xbf"
        "\x80\xbf",
        "\xf4\xf4"
        "\x80\x8f"
        "\x80\xbf"
        "\x80\xbf",
    };
    gram_seq_class(b, &s, ascii);
    gram_seq_ref(b, &s, next);
    gram_alt_add(b, rule, &s);
    for (size_t i = 0; i < sizeof multi / sizeof *multi; i++) {
        gram_seq_reset(&s);
        for (const char *p = multi[i]; *p; p += 2) {
            char pair[3] = {p[0], p[1], 0};
            gram_seq_ranges(b, &s, pair);
        }
        gram_seq_ref(b, &s, next);
        gram_alt_add(b, rule, &s);
    }
    if (!raw) {
        gram_seq_reset(&s);
        gram_seq_byte(b, &s, '\\');
        gram_seq_ranges(b, &s, "\"\"\\\\//bbffnnrrtt");
        gram_seq_ref(b, &s, next);
        gram_alt_add(b, rule, &s);
        /* \uXXXX: no surrogates (lone ones are not text) and no NUL */
        static const char *const hexes[][4] = {
            {"00", "00", "00", "19afAF"},             /* \u000X, X != 0 */
            {"00", "00", "19afAF", "09afAF"},         /* \u00XY, X != 0 */
            {"00", "19afAF", "09afAF", "09afAF"},     /* \u0XYZ, X != 0 */
            {"19acAC", "09afAF", "09afAF", "09afAF"}, /* \u1000-\ucfff */
            {"ddDD", "07", "09afAF", "09afAF"},       /* \ud000-\ud7ff */
            {"efEF", "09afAF", "09afAF", "09afAF"},   /* \ue000-\uffff */
        };
        for (size_t i = 0; i < sizeof hexes / sizeof *hexes; i++) {
            gram_seq_reset(&s);
            gram_seq_byte(b, &s, '\\');
            gram_seq_byte(b, &s, 'u');
            for (int k = 0; k < 4; k++)
                gram_seq_ranges(b, &s, hexes[i][k]);
            gram_seq_ref(b, &s, next);
            gram_alt_add(b, rule, &s);
        }
    }
    gram_seq_free(&s);
}

static struct gram_class string_ascii(void)
{
    struct gram_class c = {{0}};
    for (unsigned x = 0x20; x < 0x80; x++)
        if (x != '"' && x != '\\')
            c.w[x >> 6] |= 1ull << (x & 63);
    return c;
}

/* string ::= '"' body; body ::= char body | '"' */
static uint32_t string_rule(struct json_gen *j)
{
    if (j->r_string != GRAM_INF)
        return j->r_string;
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    struct gram_class ascii = string_ascii();
    uint32_t body = gram_rule_new(b);
    add_char_alts(j, body, body, 0, &ascii);
    gram_seq_byte(b, &s, '"');
    gram_alt_add(b, body, &s);
    uint32_t str = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '"');
    gram_seq_ref(b, &s, body);
    gram_alt_add(b, str, &s);
    gram_seq_free(&s);
    j->r_body = body;
    return j->r_string = str;
}

/* digits(lo..hi) then next: lo digits at least, hi at most, as a chain of rules */
static uint32_t digits_rule(struct json_gen *j, int lo, int hi, uint32_t next)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t after = next;
    /* build from the last digit backwards: d_k ::= [0-9] d_{k+1} | next (k >= lo) */
    for (int k = hi; k >= 0; k--) {
        uint32_t r = gram_rule_new(b);
        if (k < hi) {
            gram_seq_reset(&s);
            gram_seq_ranges(b, &s, "09");
            gram_seq_ref(b, &s, after);
            gram_alt_add(b, r, &s);
        }
        if (k >= lo) {
            gram_seq_reset(&s);
            if (next != GRAM_INF)
                gram_seq_ref(b, &s, next);
            gram_alt_add(b, r, &s);
        }
        after = r;
    }
    gram_seq_free(&s);
    return after;
}

static uint32_t empty_rule(struct gram_builder *b)
{
    struct gram_seq s = {0};
    uint32_t r = gram_rule_new(b);
    gram_alt_add(b, r, &s);
    return r;
}

/* number ::= '-'? int frac? exp?; integer ::= '-'? int */
static uint32_t number_rule(struct json_gen *j, int integer, int non_negative)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t tail;
    if (integer) {
        tail = empty_rule(b);
    } else {
        /* exp ::= "" | [eE] [+-]? digits(1..2) */
        uint32_t exp = gram_rule_new(b);
        gram_alt_add(b, exp, &s);
        uint32_t ed = digits_rule(j, 1, EXP_DIGITS, empty_rule(b));
        gram_seq_ranges(b, &s, "eeEE");
        gram_seq_ranges(b, &s, "++--");
        gram_seq_ref(b, &s, ed);
        gram_alt_add(b, exp, &s);
        gram_seq_reset(&s);
        gram_seq_ranges(b, &s, "eeEE");
        gram_seq_ref(b, &s, ed);
        gram_alt_add(b, exp, &s);
        /* frac ::= exp | '.' digits(1..16) exp */
        uint32_t frac = gram_rule_new(b);
        gram_seq_reset(&s);
        gram_seq_ref(b, &s, exp);
        gram_alt_add(b, frac, &s);
        gram_seq_reset(&s);
        gram_seq_byte(b, &s, '.');
        gram_seq_ref(b, &s, digits_rule(j, 1, FRAC_DIGITS, exp));
        gram_alt_add(b, frac, &s);
        tail = frac;
    }
    /* int ::= '0' tail | [1-9] digits(0..17) tail */
    uint32_t in = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '0');
    gram_seq_ref(b, &s, tail);
    gram_alt_add(b, in, &s);
    gram_seq_reset(&s);
    gram_seq_ranges(b, &s, "19");
    gram_seq_ref(b, &s, digits_rule(j, 0, INT_DIGITS - 1, tail));
    gram_alt_add(b, in, &s);
    uint32_t num = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, in);
    gram_alt_add(b, num, &s);
    if (!non_negative) {
        gram_seq_reset(&s);
        gram_seq_byte(b, &s, '-');
        gram_seq_ref(b, &s, in);
        gram_alt_add(b, num, &s);
    }
    gram_seq_free(&s);
    return num;
}

static uint32_t lit_rule(struct json_gen *j, const char *text)
{
    return gram_rule_lit(j->b, text, strlen(text));
}

static uint32_t value_rule(struct json_gen *j);

/* object_any ::= '{' ws ('}' | kv (ws ',' ws kv)* ws '}'), kv values of rule val
 * (GRAM_INF: any value) */
static uint32_t object_any(struct json_gen *j, uint32_t val)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t ws = ws_rule(j), str = string_rule(j);
    if (val == GRAM_INF)
        val = value_rule(j);
    uint32_t obj = gram_rule_new(b), o1 = gram_rule_new(b), o2 = gram_rule_new(b);
    gram_seq_byte(b, &s, '{');
    gram_seq_ref(b, &s, ws);
    gram_seq_ref(b, &s, o1);
    gram_alt_add(b, obj, &s);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '}');
    gram_alt_add(b, o1, &s);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, str);
    gram_seq_ref(b, &s, ws);
    gram_seq_byte(b, &s, ':');
    gram_seq_ref(b, &s, ws);
    gram_seq_ref(b, &s, val);
    gram_seq_ref(b, &s, o2);
    gram_alt_add(b, o1, &s);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, ws);
    gram_seq_byte(b, &s, ',');
    gram_seq_ref(b, &s, ws);
    gram_seq_ref(b, &s, str);
    gram_seq_ref(b, &s, ws);
    gram_seq_byte(b, &s, ':');
    gram_seq_ref(b, &s, ws);
    gram_seq_ref(b, &s, val);
    gram_seq_ref(b, &s, o2);
    gram_alt_add(b, o2, &s);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, ws);
    gram_seq_byte(b, &s, '}');
    gram_alt_add(b, o2, &s);
    gram_seq_free(&s);
    return obj;
}

static uint32_t array_any(struct json_gen *j)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t ws = ws_rule(j), val = value_rule(j);
    uint32_t arr = gram_rule_new(b), a1 = gram_rule_new(b), a2 = gram_rule_new(b);
    gram_seq_byte(b, &s, '[');
    gram_seq_ref(b, &s, ws);
    gram_seq_ref(b, &s, a1);
    gram_alt_add(b, arr, &s);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, ']');
    gram_alt_add(b, a1, &s);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, val);
    gram_seq_ref(b, &s, a2);
    gram_alt_add(b, a1, &s);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, ws);
    gram_seq_byte(b, &s, ',');
    gram_seq_ref(b, &s, ws);
    gram_seq_ref(b, &s, val);
    gram_seq_ref(b, &s, a2);
    gram_alt_add(b, a2, &s);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, ws);
    gram_seq_byte(b, &s, ']');
    gram_alt_add(b, a2, &s);
    gram_seq_free(&s);
    return arr;
}

/* Any JSON value. */
static uint32_t value_rule(struct json_gen *j)
{
    if (j->r_value != GRAM_INF)
        return j->r_value;
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t v = gram_rule_new(b);
    j->r_value = v; /* before the recursion below */
    uint32_t alts[7] = {object_any(j, v),     array_any(j),        string_rule(j),
                        number_rule(j, 0, 0), lit_rule(j, "true"), lit_rule(j, "false"),
                        lit_rule(j, "null")};
    for (int i = 0; i < 7; i++) {
        gram_seq_reset(&s);
        gram_seq_ref(b, &s, alts[i]);
        gram_alt_add(b, v, &s);
    }
    gram_seq_free(&s);
    return v;
}

/* ==== formats ============================================================================== */

static void seq_alt_ranges(struct gram_builder *b, uint32_t rule, const char *const *ranges,
                           size_t n)
{
    struct gram_seq s = {0};
    for (size_t i = 0; i < n; i++)
        gram_seq_ranges(b, &s, ranges[i]);
    gram_alt_add(b, rule, &s);
    gram_seq_free(&s);
}

/* YYYY-MM-DD with days per month (February to 28: no leap-year arithmetic). */
static uint32_t date_rule(struct gram_builder *b)
{
    uint32_t md = gram_rule_new(b);
    const char *a[5];
    /* month 01..12 with its day ranges, as alternatives of (month, '-', day) */
    static const char *const months31[] = {"01", "03", "05", "07", "08", "10", "12"};
    static const char *const months30[] = {"04", "06", "09", "11"};
    for (int k = 0; k < 7 + 4 + 1; k++) {
        char m0[3], m1[3];
        const char *mm = k < 7 ? months31[k] : k < 11 ? months30[k - 7] : "02";
        m0[0] = m0[1] = mm[0];
        m1[0] = m1[1] = mm[1];
        m0[2] = m1[2] = 0;
        int days = k < 7 ? 31 : k < 11 ? 30 : 28;
        /* 0[1-9] | [12][0-9] (| 2[0-8]) | 3[01] or 30 */
        a[0] = m0;
        a[1] = m1;
        a[2] = "--";
        a[3] = "00";
        a[4] = "19";
        seq_alt_ranges(b, md, a, 5);
        a[3] = days == 28 ? "11" : "12";
        a[4] = "09";
        seq_alt_ranges(b, md, a, 5);
        if (days == 28) {
            a[3] = "22";
            a[4] = "08";
            seq_alt_ranges(b, md, a, 5);
        } else {
            a[3] = "33";
            a[4] = days == 31 ? "01" : "00";
            seq_alt_ranges(b, md, a, 5);
        }
    }
    uint32_t date = gram_rule_new(b);
    struct gram_seq s = {0};
    for (int i = 0; i < 4; i++)
        gram_seq_ranges(b, &s, "09");
    gram_seq_byte(b, &s, '-');
    gram_seq_ref(b, &s, md);
    gram_alt_add(b, date, &s);
    gram_seq_free(&s);
    return date;
}

/* HH:MM:SS(.f{1,6})?(Z|[+-]HH:MM) */
static uint32_t time_rule(struct json_gen *j)
{
    struct gram_builder *b = j->b;
    uint32_t hh = gram_rule_new(b);
    static const char *const h1[] = {"01", "09"}, *const h2[] = {"22", "03"};
    seq_alt_ranges(b, hh, h1, 2);
    seq_alt_ranges(b, hh, h2, 2);
    uint32_t zone = gram_rule_new(b);
    struct gram_seq s = {0};
    gram_seq_ranges(b, &s, "zzZZ");
    gram_alt_add(b, zone, &s);
    gram_seq_reset(&s);
    gram_seq_ranges(b, &s, "++--");
    gram_seq_ref(b, &s, hh);
    gram_seq_byte(b, &s, ':');
    gram_seq_ranges(b, &s, "05");
    gram_seq_ranges(b, &s, "09");
    gram_alt_add(b, zone, &s);
    uint32_t frac = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, zone);
    gram_alt_add(b, frac, &s);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '.');
    gram_seq_ref(b, &s, digits_rule(j, 1, 6, zone));
    gram_alt_add(b, frac, &s);
    uint32_t t = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_ref(b, &s, hh);
    gram_seq_byte(b, &s, ':');
    gram_seq_ranges(b, &s, "05");
    gram_seq_ranges(b, &s, "09");
    gram_seq_byte(b, &s, ':');
    gram_seq_ranges(b, &s, "05");
    gram_seq_ranges(b, &s, "09");
    gram_seq_ref(b, &s, frac);
    gram_alt_add(b, t, &s);
    gram_seq_free(&s);
    return t;
}

static uint32_t octet_rule(struct gram_builder *b)
{
    uint32_t o = gram_rule_new(b);
    static const char *const a[] = {"22", "55", "05"}, *const c[] = {"22", "04", "09"},
                             *const d[] = {"11", "09", "09"}, *const e[] = {"19", "09"},
                             *const f[] = {"09"};
    seq_alt_ranges(b, o, a, 3);
    seq_alt_ranges(b, o, c, 3);
    seq_alt_ranges(b, o, d, 3);
    seq_alt_ranges(b, o, e, 2);
    seq_alt_ranges(b, o, f, 1);
    return o;
}

/* The unquoted body of a string format, or GRAM_INF when unknown. */
static uint32_t format_body(struct json_gen *j, const char *fmt)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t r = GRAM_INF;
    if (!strcmp(fmt, "date")) {
        r = date_rule(b);
    } else if (!strcmp(fmt, "time")) {
        r = time_rule(j);
    } else if (!strcmp(fmt, "date-time")) {
        r = gram_rule_new(b);
        gram_seq_ref(b, &s, date_rule(b));
        gram_seq_ranges(b, &s, "TTtt");
        gram_seq_ref(b, &s, time_rule(j));
        gram_alt_add(b, r, &s);
    } else if (!strcmp(fmt, "uuid")) {
        r = gram_rule_new(b);
        static const int groups[] = {8, 4, 4, 4, 12};
        for (int g = 0; g < 5; g++) {
            if (g)
                gram_seq_byte(b, &s, '-');
            for (int k = 0; k < groups[g]; k++)
                gram_seq_ranges(b, &s, "09afAF");
        }
        gram_alt_add(b, r, &s);
    } else if (!strcmp(fmt, "ipv4")) {
        r = gram_rule_new(b);
        uint32_t o = octet_rule(b);
        for (int k = 0; k < 4; k++) {
            if (k)
                gram_seq_byte(b, &s, '.');
            gram_seq_ref(b, &s, o);
        }
        gram_alt_add(b, r, &s);
    }
    gram_seq_free(&s);
    return r;
}

/* ==== integer ranges ======================================================================== */

static uint64_t pow10u(int n)
{
    uint64_t p = 1;
    while (n-- > 0)
        p *= 10;
    return p;
}

/* Digit strings of equal length between lo and hi (as text), as a rule. */
static uint32_t same_len_range(struct json_gen *j, const char *lo, const char *hi, size_t n)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t r = gram_rule_new(b);
    if (n == 0) {
        gram_alt_add(b, r, &s);
        return r;
    }
    char nines[24], zeros[24];
    memset(nines, '9', n - 1);
    memset(zeros, '0', n - 1);
    if (strspn(lo, "0") >= n && strspn(hi, "9") >= n) {
        for (size_t k = 0; k < n; k++)
            gram_seq_ranges(b, &s, "09");
        gram_alt_add(b, r, &s);
    } else if (lo[0] == hi[0]) {
        gram_seq_byte(b, &s, (unsigned char)lo[0]);
        gram_seq_ref(b, &s, same_len_range(j, lo + 1, hi + 1, n - 1));
        gram_alt_add(b, r, &s);
    } else {
        gram_seq_byte(b, &s, (unsigned char)lo[0]);
        gram_seq_ref(b, &s, same_len_range(j, lo + 1, nines, n - 1));
        gram_alt_add(b, r, &s);
        if (hi[0] - lo[0] > 1) {
            char mid[3] = {(char)(lo[0] + 1), (char)(hi[0] - 1), 0};
            gram_seq_reset(&s);
            gram_seq_ranges(b, &s, mid);
            for (size_t k = 1; k < n; k++)
                gram_seq_ranges(b, &s, "09");
            gram_alt_add(b, r, &s);
        }
        gram_seq_reset(&s);
        gram_seq_byte(b, &s, (unsigned char)hi[0]);
        gram_seq_ref(b, &s, same_len_range(j, zeros, hi + 1, n - 1));
        gram_alt_add(b, r, &s);
    }
    gram_seq_free(&s);
    return r;
}

/* Adds alternatives to rule for the decimal forms of [lo, hi] (0 <= lo <= hi),
 * each prefixed by sign when non-NULL. */
static void nonneg_range(struct json_gen *j, uint32_t rule, uint64_t lo, uint64_t hi,
                         const char *sign)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    for (int len = 1; len <= INT_DIGITS; len++) {
        uint64_t first = len == 1 ? 0 : pow10u(len - 1), last = pow10u(len) - 1;
        uint64_t a = lo > first ? lo : first, z = hi < last ? hi : last;
        if (a > z)
            continue;
        char la[24], lz[24];
        snprintf(la, sizeof la, "%llu", (unsigned long long)a);
        snprintf(lz, sizeof lz, "%llu", (unsigned long long)z);
        gram_seq_reset(&s);
        if (sign)
            gram_seq_lit(b, &s, sign, strlen(sign));
        gram_seq_ref(b, &s, same_len_range(j, la, lz, (size_t)len));
        gram_alt_add(b, rule, &s);
    }
    gram_seq_free(&s);
}

static uint32_t integer_range(struct json_gen *j, int64_t lo, int64_t hi)
{
    uint32_t r = gram_rule_new(j->b);
    if (hi >= 0)
        nonneg_range(j, r, lo > 0 ? (uint64_t)lo : 0, (uint64_t)hi, NULL);
    if (lo < 0)
        nonneg_range(j, r, hi < 0 ? (uint64_t)(-(hi)) : 1, (uint64_t)(-lo), "-");
    return r;
}

/* ==== schemas ================================================================================ */

static uint32_t gen(struct json_gen *j, const json_t *schema, const char *path,
                    struct splash_err *err, enum splash_status *st);

static const json_t *resolve_ref(struct json_gen *j, const char *ref)
{
    if (ref[0] != '#')
        return NULL;
    const json_t *at = j->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0') {
                tok[n++] = '~';
                p += 2;
            } else if (p[0] == '~' && p[1] == '1') {
                tok[n++] = '/';
                p += 2;
            } else {
                tok[n++] = *p++;
            }
        }
        tok[n] = 0;
        if (json_is_object(at)) {
            at = json_object_get(at, tok);
        } else if (json_is_array(at)) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            at = *end || !n ? NULL : json_array_get(at, i);
        } else {
            at = NULL;
        }
        if (!at)
            return NULL;
    }
    return *p ? NULL : at;
}

/* Whether the literal JSON value fits the schema's type list (NULL: any). */
static int type_allows(const json_t *type, const json_t *v)
{
    if (!type)
        return 1;
    const char *names[8];
    size_t n = 0;
    if (json_is_string(type))
        names[n++] = json_string_value(type);
    else
        for (size_t i = 0; i < json_array_size(type) && n < 8; i++)
            names[n++] = json_string_value(json_array_get(type, i));
    for (size_t i = 0; i < n; i++) {
        const char *t = names[i] ? names[i] : "";
        if ((!strcmp(t, "string") && json_is_string(v)) ||
            (!strcmp(t, "integer") && json_is_integer(v)) ||
            (!strcmp(t, "number") && json_is_number(v)) ||
            (!strcmp(t, "boolean") && json_is_boolean(v)) ||
            (!strcmp(t, "null") && json_is_null(v)) ||
            (!strcmp(t, "object") && json_is_object(v)) ||
            (!strcmp(t, "array") && json_is_array(v)))
            return 1;
    }
    return 0;
}

static uint32_t literals(struct json_gen *j, const json_t *values, const json_t *type,
                         const char *path, const char *kw, struct splash_err *err,
                         enum splash_status *st)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    uint32_t r = gram_rule_new(b);
    size_t kept = 0;
    for (size_t i = 0; i < json_array_size(values); i++) {
        const json_t *v = json_array_get(values, i);
        if (!type_allows(type, v))
            continue;
        char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!text) {
            gram_seq_free(&s);
            return fail(st, err, SPLASH_ERR_INVALID, path, "%s: a value JSON cannot write", kw);
        }
        gram_seq_reset(&s);
        gram_seq_lit(b, &s, text, strlen(text));
        gram_alt_add(b, r, &s);
        free(text);
        kept++;
    }
    gram_seq_free(&s);
    if (!kept)
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s: no value matches the type", kw);
    return r;
}

static int get_count(const json_t *schema, const char *kw, int64_t dflt, int64_t *out,
                     const char *path, struct splash_err *err, enum splash_status *st)
{
    const json_t *v = json_object_get(schema, kw);
    *out = dflt;
    if (!v)
        return 0;
    if (json_is_real(v) && json_real_value(v) == (double)(int64_t)json_real_value(v))
        *out = (int64_t)json_real_value(v);
    else if (json_is_integer(v))
        *out = json_integer_value(v);
    else {
        fail(st, err, SPLASH_ERR_INVALID, path, "%s: not an integer", kw);
        return -1;
    }
    if (*out < 0) {
        fail(st, err, SPLASH_ERR_INVALID, path, "%s: negative", kw);
        return -1;
    }
    return 0;
}

static uint32_t gen_string(struct json_gen *j, const json_t *schema, const char *path,
                           struct splash_err *err, enum splash_status *st)
{
    struct gram_builder *b = j->b;
    int64_t lo, hi;
    if (get_count(schema, "minLength", 0, &lo, path, err, st) ||
        get_count(schema, "maxLength", -1, &hi, path, err, st))
        return GRAM_INF;
    const json_t *fmt = json_object_get(schema, "format");
    if (fmt) {
        if (!json_is_string(fmt))
            return fail(st, err, SPLASH_ERR_INVALID, path, "format: %s", "not a string");
        if (json_object_get(schema, "minLength") || json_object_get(schema, "maxLength"))
            return fail(st, err, SPLASH_ERR_UNSUPPORTED, path,
                        "unsupported keyword \"%s\" with format", "minLength/maxLength");
        uint32_t body = format_body(j, json_string_value(fmt));
        if (body == GRAM_INF)
            return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "format \"%s\" is not supported",
                        json_string_value(fmt));
        struct gram_seq s = {0};
        uint32_t r = gram_rule_new(b);
        gram_seq_byte(b, &s, '"');
        gram_seq_ref(b, &s, body);
        gram_seq_byte(b, &s, '"');
        gram_alt_add(b, r, &s);
        gram_seq_free(&s);
        return r;
    }
    if (lo == 0 && hi < 0)
        return string_rule(j);
    if (lo > MAX_LENGTH_BOUND || hi > MAX_LENGTH_BOUND) {
        char what[64];
        snprintf(what, sizeof what, "%s above %d",
                 lo > MAX_LENGTH_BOUND ? "minLength" : "maxLength", MAX_LENGTH_BOUND);
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "unsupported keyword value: %s", what);
    }
    if (hi >= 0 && hi < lo)
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s", "maxLength below minLength");
    /* c_k: k characters written so far */
    struct gram_class ascii = string_ascii();
    string_rule(j);
    int64_t last = hi >= 0 ? hi : lo;
    uint32_t c[MAX_LENGTH_BOUND + 2];
    for (int64_t k = 0; k <= last; k++)
        c[k] = gram_rule_new(b);
    struct gram_seq s = {0};
    for (int64_t k = 0; k <= last; k++) {
        if (k < last)
            add_char_alts(j, c[k], c[k + 1], 0, &ascii);
        else if (hi < 0)
            add_char_alts(j, c[k], j->r_body, 0, &ascii); /* then free */
        if (k >= lo) {
            gram_seq_reset(&s);
            gram_seq_byte(b, &s, '"');
            gram_alt_add(b, c[k], &s);
        }
    }
    uint32_t r = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '"');
    gram_seq_ref(b, &s, c[0]);
    gram_alt_add(b, r, &s);
    gram_seq_free(&s);
    return r;
}

static int get_bound(const json_t *schema, const char *kw, double *out)
{
    const json_t *v = json_object_get(schema, kw);
    if (!v || !json_is_number(v))
        return 0;
    *out = json_number_value(v);
    return 1;
}

static uint32_t gen_number(struct json_gen *j, const json_t *schema, int integer, const char *path,
                           struct splash_err *err, enum splash_status *st)
{
    double mn = 0, mx = 0, xmn = 0, xmx = 0;
    int has_mn = get_bound(schema, "minimum", &mn), has_mx = get_bound(schema, "maximum", &mx);
    int has_xmn = get_bound(schema, "exclusiveMinimum", &xmn);
    int has_xmx = get_bound(schema, "exclusiveMaximum", &xmx);
    static const char *const kws[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(schema, kws[k]);
        if (v && !json_is_number(v))
            return fail(st, err, SPLASH_ERR_INVALID, path, "%s: not a number", kws[k]);
    }
    if (!has_mn && !has_mx && !has_xmn && !has_xmx)
        return number_rule(j, integer, 0);
    if (!integer) {
        /* a number at least 0: no sign */
        if (has_mn && mn == 0 && !has_mx && !has_xmn && !has_xmx)
            return number_rule(j, 0, 1);
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path,
                    "unsupported keyword \"%s\" on a number (integers only)",
                    has_mn    ? "minimum"
                    : has_mx  ? "maximum"
                    : has_xmn ? "exclusiveMinimum"
                              : "exclusiveMaximum");
    }
    const double limit = 1e18; /* past INT_DIGITS digits: the range writer stops there */
    double ilo = -limit, ihi = limit;
    if (has_mn && ceil(mn) > ilo)
        ilo = ceil(mn);
    if (has_xmn && floor(xmn) + 1 > ilo)
        ilo = floor(xmn) + 1;
    if (has_mx && floor(mx) < ihi)
        ihi = floor(mx);
    if (has_xmx && ceil(xmx) - 1 < ihi)
        ihi = ceil(xmx) - 1;
    if (ilo < -limit)
        ilo = -limit;
    if (ihi > limit)
        ihi = limit;
    if (ilo > ihi)
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s", "no integer is in range");
    return integer_range(j, (int64_t)ilo, (int64_t)ihi);
}

struct prop {
    const char *name;
    const json_t *schema;
    int required;
};

/* "name" excluded: an escape-free ASCII key that is none of names (extra properties
 * must not repeat a declared one). */
static uint32_t extra_key(struct json_gen *j, struct prop *props, size_t n)
{
    struct gram_builder *b = j->b;
    if (n == 0)
        return string_rule(j);
    struct gram_class ascii = {{0}};
    for (unsigned x = 0x20; x < 0x7f; x++)
        if (x != '"' && x != '\\')
            ascii.w[x >> 6] |= 1ull << (x & 63);
    struct gram_seq s = {0};
    /* free ::= [ascii] free | '"' */
    uint32_t free_r = gram_rule_new(b);
    gram_seq_class(b, &s, &ascii);
    gram_seq_ref(b, &s, free_r);
    gram_alt_add(b, free_r, &s);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '"');
    gram_alt_add(b, free_r, &s);
    /* a rule per prefix of the names: node(prefix) */
    uint32_t root = GRAM_INF;
    /* prefixes are enumerated as (name index, length); the first name owning a prefix
     * builds its rule */
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(props[i].name) + 1;
    uint32_t *rule_of = malloc(total * sizeof *rule_of);
    size_t *base = malloc((n + 1) * sizeof *base);
    if (!rule_of || !base) {
        free(rule_of);
        free(base);
        b->nomem = 1;
        gram_seq_free(&s);
        return 0;
    }
    size_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        base[i] = acc;
        acc += strlen(props[i].name) + 1;
    }
    /* owner of prefix (i, len): the first name with that prefix */
    for (size_t i = 0; i < n; i++) {
        size_t li = strlen(props[i].name);
        for (size_t len = 0; len <= li; len++) {
            size_t owner = i;
            for (size_t k = 0; k < i; k++)
                if (strlen(props[k].name) >= len && !memcmp(props[k].name, props[i].name, len)) {
                    owner = k;
                    break;
                }
            rule_of[base[i] + len] = owner == i ? gram_rule_new(b) : rule_of[base[owner] + len];
        }
    }
    for (size_t i = 0; i < n; i++) {
        size_t li = strlen(props[i].name);
        for (size_t len = 0; len <= li; len++) {
            uint32_t r = rule_of[base[i] + len];
            int owner = 1;
            for (size_t k = 0; k < i; k++)
                if (strlen(props[k].name) >= len && !memcmp(props[k].name, props[i].name, len))
                    owner = 0;
            if (!owner)
                continue;
            /* children bytes of this prefix, and whether it is a whole name */
            struct gram_class other = ascii;
            int whole = 0;
            for (size_t k = 0; k < n; k++) {
                const char *nk = props[k].name;
                size_t lk = strlen(nk);
                if (lk < len || memcmp(nk, props[i].name, len))
                    continue;
                if (lk == len) {
                    whole = 1;
                    continue;
                }
                unsigned char c = (unsigned char)nk[len];
                if (!gram_class_has(&ascii, c))
                    continue; /* a name no escape-free ASCII key can spell */
                if (!gram_class_has(&other, c))
                    continue; /* child added already */
                other.w[c >> 6] &= ~(1ull << (c & 63));
                gram_seq_reset(&s);
                gram_seq_byte(b, &s, c);
                gram_seq_ref(b, &s, rule_of[base[k] + len + 1]);
                gram_alt_add(b, r, &s);
            }
            gram_seq_reset(&s);
            gram_seq_class(b, &s, &other);
            gram_seq_ref(b, &s, free_r);
            gram_alt_add(b, r, &s);
            if (!whole) {
                gram_seq_reset(&s);
                gram_seq_byte(b, &s, '"');
                gram_alt_add(b, r, &s);
            }
            if (len == 0)
                root = r;
        }
    }
    free(rule_of);
    free(base);
    uint32_t key = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '"');
    gram_seq_ref(b, &s, root);
    gram_alt_add(b, key, &s);
    gram_seq_free(&s);
    return key;
}

static uint32_t gen_object(struct json_gen *j, const json_t *schema, const char *path,
                           struct splash_err *err, enum splash_status *st)
{
    struct gram_builder *b = j->b;
    const json_t *props = json_object_get(schema, "properties");
    const json_t *req = json_object_get(schema, "required");
    const json_t *addl = json_object_get(schema, "additionalProperties");
    if (props && !json_is_object(props))
        return fail(st, err, SPLASH_ERR_INVALID, path, "properties: %s", "not an object");
    if (req && !json_is_array(req))
        return fail(st, err, SPLASH_ERR_INVALID, path, "required: %s", "not an array");
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return fail(st, err, SPLASH_ERR_INVALID, path, "additionalProperties: %s", "not a schema");
    for (size_t i = 0; i < json_array_size(req); i++)
        if (!json_is_string(json_array_get(req, i)))
            return fail(st, err, SPLASH_ERR_INVALID, path, "required: %s", "not a string list");
    /* extra properties: where additionalProperties allows them, or an object
     * schema that declares no properties at all */
    int extras = addl ? !json_is_false(addl) : !props;
    const json_t *extra_schema = json_is_object(addl) ? addl : NULL;
    if (!props && !req && !extra_schema && extras)
        return object_any(j, GRAM_INF);
    size_t n_props = json_object_size(props), n_req = json_array_size(req);
    struct prop *p = calloc(n_props + n_req + 1, sizeof *p);
    uint32_t *vals = calloc(n_props + n_req + 1, sizeof *vals);
    uint32_t result = GRAM_INF;
    if (!p || !vals) {
        b->nomem = 1;
        goto out;
    }
    size_t n = 0;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)props, key, val)
    {
        p[n].name = key;
        p[n].schema = val;
        for (size_t i = 0; i < n_req; i++)
            if (!strcmp(json_string_value(json_array_get(req, i)), key))
                p[n].required = 1;
        n++;
    }
    /* required names without a declared schema take the extra properties' */
    for (size_t i = 0; i < n_req; i++) {
        const char *name = json_string_value(json_array_get(req, i));
        int found = 0;
        for (size_t k = 0; k < n; k++)
            found |= !strcmp(p[k].name, name);
        if (found)
            continue;
        if (!extras) {
            char sp[256];
            sub_path(sp, sizeof sp, path, "required", NULL);
            fail(st, err, SPLASH_ERR_UNSUPPORTED, sp,
                 "\"%s\" is required but additionalProperties forbids it", name);
            goto out;
        }
        p[n].name = name;
        p[n].schema = extra_schema;
        p[n].required = 1;
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        char sp[256];
        sub_path(sp, sizeof sp, path, "properties", p[i].name);
        vals[i] = p[i].schema ? gen(j, p[i].schema, sp, err, st) : value_rule(j);
        if (vals[i] == GRAM_INF)
            goto out;
    }
    uint32_t extra_val = GRAM_INF, extra_k = GRAM_INF;
    if (extras) {
        char sp[256];
        sub_path(sp, sizeof sp, path, "additionalProperties", NULL);
        extra_val = extra_schema ? gen(j, extra_schema, sp, err, st) : value_rule(j);
        if (extra_val == GRAM_INF)
            goto out;
        extra_k = extra_key(j, p, n);
    }
    uint32_t ws = ws_rule(j);
    /* f[i]: the first property written is i or later; r[i]: one was written, the
     * next is i or later */
    uint32_t *f = malloc((n + 1) * sizeof *f), *r = malloc((n + 1) * sizeof *r);
    if (!f || !r) {
        free(f);
        free(r);
        b->nomem = 1;
        goto out;
    }
    for (size_t i = 0; i <= n; i++) {
        f[i] = gram_rule_new(b);
        r[i] = gram_rule_new(b);
    }
    struct gram_seq s = {0};
    for (size_t i = 0; i <= n; i++) {
        if (i < n) {
            json_t *name = json_string(p[i].name);
            char *qk = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
            json_decref(name);
            for (int first = 1; first >= 0; first--) {
                gram_seq_reset(&s);
                if (!first) {
                    gram_seq_ref(b, &s, ws);
                    gram_seq_byte(b, &s, ',');
                    gram_seq_ref(b, &s, ws);
                }
                gram_seq_lit(b, &s, qk ? qk : "\"\"", qk ? strlen(qk) : 2);
                gram_seq_ref(b, &s, ws);
                gram_seq_byte(b, &s, ':');
                gram_seq_ref(b, &s, ws);
                gram_seq_ref(b, &s, vals[i]);
                gram_seq_ref(b, &s, r[i + 1]);
                gram_alt_add(b, first ? f[i] : r[i], &s);
                if (!p[i].required) {
                    gram_seq_reset(&s);
                    gram_seq_ref(b, &s, first ? f[i + 1] : r[i + 1]);
                    gram_alt_add(b, first ? f[i] : r[i], &s);
                }
            }
            free(qk);
        } else {
            gram_seq_reset(&s);
            gram_seq_byte(b, &s, '}');
            gram_alt_add(b, f[n], &s);
            gram_seq_reset(&s);
            gram_seq_ref(b, &s, ws);
            gram_seq_byte(b, &s, '}');
            gram_alt_add(b, r[n], &s);
            if (extras) {
                for (int first = 1; first >= 0; first--) {
                    gram_seq_reset(&s);
                    if (!first) {
                        gram_seq_ref(b, &s, ws);
                        gram_seq_byte(b, &s, ',');
                        gram_seq_ref(b, &s, ws);
                    }
                    gram_seq_ref(b, &s, extra_k);
                    gram_seq_ref(b, &s, ws);
                    gram_seq_byte(b, &s, ':');
                    gram_seq_ref(b, &s, ws);
                    gram_seq_ref(b, &s, extra_val);
                    gram_seq_ref(b, &s, r[n]);
                    gram_alt_add(b, first ? f[n] : r[n], &s);
                }
            }
        }
    }
    result = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '{');
    gram_seq_ref(b, &s, ws);
    gram_seq_ref(b, &s, f[0]);
    gram_alt_add(b, result, &s);
    gram_seq_free(&s);
    free(f);
    free(r);
out:
    free(p);
    free(vals);
    return result;
}

static uint32_t gen_array(struct json_gen *j, const json_t *schema, const char *path,
                          struct splash_err *err, enum splash_status *st)
{
    struct gram_builder *b = j->b;
    const json_t *items = json_object_get(schema, "items");
    const json_t *prefix = json_object_get(schema, "prefixItems");
    int64_t lo, hi;
    if (get_count(schema, "minItems", 0, &lo, path, err, st) ||
        get_count(schema, "maxItems", -1, &hi, path, err, st))
        return GRAM_INF;
    if (lo > MAX_ITEMS_BOUND || hi > MAX_ITEMS_BOUND)
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s above 1024",
                    lo > MAX_ITEMS_BOUND ? "minItems" : "maxItems");
    if (hi >= 0 && hi < lo)
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s", "maxItems below minItems");
    if (prefix && !json_is_array(prefix))
        return fail(st, err, SPLASH_ERR_INVALID, path, "prefixItems: %s", "not an array");
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "items: %s",
                    "an array (use prefixItems)");
    size_t n_prefix = json_array_size(prefix);
    if (n_prefix > MAX_ITEMS_BOUND)
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "prefixItems: %s", "too many");
    /* item k: prefixItems[k], then items (absent: any value; false: none) */
    int more = !json_is_false(items);
    if (!more) {
        if (hi < 0 || (size_t)hi > n_prefix)
            hi = (int64_t)n_prefix;
        if (lo > hi)
            return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s",
                        "minItems above the items allowed");
    }
    uint32_t item_rest = GRAM_INF;
    if (more) {
        char sp[256];
        sub_path(sp, sizeof sp, path, "items", NULL);
        item_rest = json_is_object(items) ? gen(j, items, sp, err, st) : value_rule(j);
        if (item_rest == GRAM_INF)
            return GRAM_INF;
    }
    /* a[k]: k items written. Bounded: up to hi. Unbounded: up to K, which loops. */
    int64_t last = hi;
    if (hi < 0) {
        last = (int64_t)n_prefix > lo ? (int64_t)n_prefix : lo;
        if (last < 1)
            last = 1;
    }
    uint32_t *a = malloc(((size_t)last + 1) * sizeof *a);
    uint32_t *it = malloc(((size_t)last + 1) * sizeof *it);
    if (!a || !it) {
        free(a);
        free(it);
        b->nomem = 1;
        return GRAM_INF;
    }
    for (int64_t k = 0; k <= last; k++) {
        a[k] = gram_rule_new(b);
        it[k] = item_rest;
        if ((size_t)k < n_prefix) {
            char sp[256], idx[24];
            snprintf(idx, sizeof idx, "%lld", (long long)k);
            sub_path(sp, sizeof sp, path, "prefixItems", idx);
            it[k] = gen(j, json_array_get(prefix, (size_t)k), sp, err, st);
            if (it[k] == GRAM_INF) {
                free(a);
                free(it);
                return GRAM_INF;
            }
        }
    }
    uint32_t ws = ws_rule(j);
    struct gram_seq s = {0};
    for (int64_t k = 0; k <= last; k++) {
        if (k >= lo) {
            gram_seq_reset(&s);
            if (k > 0)
                gram_seq_ref(b, &s, ws);
            gram_seq_byte(b, &s, ']');
            gram_alt_add(b, a[k], &s);
        }
        int loop = hi < 0 && k == last;
        if (k < last || loop) {
            gram_seq_reset(&s);
            if (k > 0) {
                gram_seq_ref(b, &s, ws);
                gram_seq_byte(b, &s, ',');
                gram_seq_ref(b, &s, ws);
            }
            gram_seq_ref(b, &s, loop ? item_rest : it[k]);
            gram_seq_ref(b, &s, loop ? a[k] : a[k + 1]);
            gram_alt_add(b, a[k], &s);
        }
    }
    uint32_t result = gram_rule_new(b);
    gram_seq_reset(&s);
    gram_seq_byte(b, &s, '[');
    gram_seq_ref(b, &s, ws);
    gram_seq_ref(b, &s, a[0]);
    gram_alt_add(b, result, &s);
    gram_seq_free(&s);
    free(a);
    free(it);
    return result;
}

static uint32_t gen_typed(struct json_gen *j, const json_t *schema, const char *type,
                          const char *path, struct splash_err *err, enum splash_status *st)
{
    if (!strcmp(type, "string"))
        return gen_string(j, schema, path, err, st);
    if (!strcmp(type, "integer"))
        return gen_number(j, schema, 1, path, err, st);
    if (!strcmp(type, "number"))
        return gen_number(j, schema, 0, path, err, st);
    if (!strcmp(type, "boolean")) {
        if (j->r_bool == GRAM_INF) {
            struct gram_seq s = {0};
            j->r_bool = gram_rule_new(j->b);
            gram_seq_lit(j->b, &s, "true", 4);
            gram_alt_add(j->b, j->r_bool, &s);
            gram_seq_reset(&s);
            gram_seq_lit(j->b, &s, "false", 5);
            gram_alt_add(j->b, j->r_bool, &s);
            gram_seq_free(&s);
        }
        return j->r_bool;
    }
    if (!strcmp(type, "null")) {
        if (j->r_null == GRAM_INF)
            j->r_null = lit_rule(j, "null");
        return j->r_null;
    }
    if (!strcmp(type, "object"))
        return gen_object(j, schema, path, err, st);
    if (!strcmp(type, "array"))
        return gen_array(j, schema, path, err, st);
    return fail(st, err, SPLASH_ERR_INVALID, path, "type \"%s\" is not a JSON type", type);
}

static int has_any(const json_t *schema, const char *const *keys)
{
    for (size_t i = 0; keys[i]; i++)
        if (json_object_get(schema, keys[i]))
            return 1;
    return 0;
}

static uint32_t gen(struct json_gen *j, const json_t *schema, const char *path,
                    struct splash_err *err, enum splash_status *st)
{
    struct gram_builder *b = j->b;
    if (json_is_true(schema))
        return value_rule(j);
    if (json_is_false(schema))
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s",
                    "the false schema matches nothing");
    if (!json_is_object(schema))
        return fail(st, err, SPLASH_ERR_INVALID, path, "%s", "a schema must be an object");
    if (j->depth >= MAX_DEPTH)
        return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s", "nested too deeply");
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)schema, key, val)
    {
        if (!in_list(annotations, key) && !in_list(value_keywords, key))
            return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "unsupported keyword \"%s\"", key);
    }
    uint32_t result = GRAM_INF;
    j->depth++;
    const json_t *ref = json_object_get(schema, "$ref");
    const json_t *any = json_object_get(schema, "anyOf");
    const char *any_kw = "anyOf";
    if (!any) {
        any = json_object_get(schema, "oneOf");
        any_kw = "oneOf";
    }
    const json_t *all = json_object_get(schema, "allOf");
    const json_t *en = json_object_get(schema, "enum");
    const json_t *cn = json_object_get(schema, "const");
    const json_t *type = json_object_get(schema, "type");
    /* composition keywords stand alone (with annotations): intersections are not grammar */
    int n_value = 0;
    for (size_t i = 0; value_keywords[i]; i++)
        n_value += json_object_get(schema, value_keywords[i]) != NULL;
    if (ref || any || all) {
        const char *kw = ref ? "$ref" : any ? any_kw : "allOf";
        if (json_object_get(schema, "anyOf") && json_object_get(schema, "oneOf"))
            kw = "oneOf";
        if (n_value > 1) {
            const char *other = NULL;
            for (size_t i = 0; value_keywords[i] && !other; i++)
                if (strcmp(value_keywords[i], kw) && json_object_get(schema, value_keywords[i]))
                    other = value_keywords[i];
            char what[128];
            snprintf(what, sizeof what, "unsupported keyword \"%s\" beside %s", other, kw);
            result = fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s", what);
            goto out;
        }
    }
    if (ref) {
        if (!json_is_string(ref)) {
            result = fail(st, err, SPLASH_ERR_INVALID, path, "$ref: %s", "not a string");
            goto out;
        }
        const json_t *target = resolve_ref(j, json_string_value(ref));
        if (!target) {
            result = fail(st, err, SPLASH_ERR_UNSUPPORTED, path,
                          "$ref \"%s\" does not resolve in this document", json_string_value(ref));
            goto out;
        }
        for (size_t i = 0; i < j->n_refs; i++)
            if (j->refs[i].target == target) {
                result = j->refs[i].rule;
                goto out;
            }
        if (j->n_refs == j->cap_refs) {
            size_t cap = j->cap_refs ? 2 * j->cap_refs : 16;
            struct ref_memo *m = realloc(j->refs, cap * sizeof *m);
            if (!m) {
                b->nomem = 1;
                goto out;
            }
            j->refs = m;
            j->cap_refs = cap;
        }
        uint32_t alias = gram_rule_new(b);
        j->refs[j->n_refs++] = (struct ref_memo){target, alias};
        char sp[256];
        snprintf(sp, sizeof sp, "%s", json_string_value(ref));
        uint32_t body = gen(j, target, sp, err, st);
        if (body == GRAM_INF)
            goto out;
        struct gram_seq s = {0};
        gram_seq_ref(b, &s, body);
        gram_alt_add(b, alias, &s);
        gram_seq_free(&s);
        result = alias;
        goto out;
    }
    if (any) {
        if (!json_is_array(any) || json_array_size(any) == 0) {
            result = fail(st, err, SPLASH_ERR_INVALID, path, "%s: not a non-empty array", any_kw);
            goto out;
        }
        uint32_t r = gram_rule_new(b);
        struct gram_seq s = {0};
        for (size_t i = 0; i < json_array_size(any); i++) {
            char sp[256], idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            sub_path(sp, sizeof sp, path, any_kw, idx);
            uint32_t alt = gen(j, json_array_get(any, i), sp, err, st);
            if (alt == GRAM_INF) {
                gram_seq_free(&s);
                goto out;
            }
            gram_seq_reset(&s);
            gram_seq_ref(b, &s, alt);
            gram_alt_add(b, r, &s);
        }
        gram_seq_free(&s);
        result = r;
        goto out;
    }
    if (all) {
        if (!json_is_array(all) || json_array_size(all) != 1) {
            result = fail(st, err, SPLASH_ERR_UNSUPPORTED, path,
                          "unsupported keyword \"%s\" "
                          "(only one schema)",
                          "allOf");
            goto out;
        }
        char sp[256];
        sub_path(sp, sizeof sp, path, "allOf", "0");
        result = gen(j, json_array_get(all, 0), sp, err, st);
        goto out;
    }
    if (type && !json_is_string(type) && !json_is_array(type)) {
        result = fail(st, err, SPLASH_ERR_INVALID, path, "type: %s", "not a string or list");
        goto out;
    }
    if (en || cn) {
        const char *kw = en ? "enum" : "const";
        static const char *const allowed_with_literal[] = {"enum", "const", "type", NULL};
        for (size_t i = 0; value_keywords[i]; i++)
            if (!in_list(allowed_with_literal, value_keywords[i]) &&
                json_object_get(schema, value_keywords[i])) {
                char what[128];
                snprintf(what, sizeof what, "unsupported keyword \"%s\" beside %s",
                         value_keywords[i], kw);
                result = fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s", what);
                goto out;
            }
        if (en && cn) {
            result = fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "%s", "enum beside const");
            goto out;
        }
        if (en && (!json_is_array(en) || json_array_size(en) == 0)) {
            result = fail(st, err, SPLASH_ERR_INVALID, path, "enum: %s", "not a non-empty array");
            goto out;
        }
        json_t *one = NULL;
        if (cn) {
            one = json_array();
            json_array_append(one, (json_t *)cn);
        }
        result = literals(j, en ? en : one, type, path, kw, err, st);
        json_decref(one);
        goto out;
    }
    if (type) {
        size_t n_types = json_is_string(type) ? 1 : json_array_size(type);
        if (n_types == 0) {
            result = fail(st, err, SPLASH_ERR_INVALID, path, "type: %s", "an empty list");
            goto out;
        }
        if (n_types == 1) {
            const json_t *t = json_is_string(type) ? type : json_array_get(type, 0);
            if (!json_is_string(t)) {
                result = fail(st, err, SPLASH_ERR_INVALID, path, "type: %s", "not a string");
                goto out;
            }
            result = gen_typed(j, schema, json_string_value(t), path, err, st);
            goto out;
        }
        uint32_t r = gram_rule_new(b);
        struct gram_seq s = {0};
        for (size_t i = 0; i < n_types; i++) {
            const json_t *t = json_array_get(type, i);
            uint32_t alt =
                json_is_string(t)
                    ? gen_typed(j, schema, json_string_value(t), path, err, st)
                    : fail(st, err, SPLASH_ERR_INVALID, path, "type: %s", "not a string");
            if (alt == GRAM_INF) {
                gram_seq_free(&s);
                goto out;
            }
            gram_seq_reset(&s);
            gram_seq_ref(b, &s, alt);
            gram_alt_add(b, r, &s);
        }
        gram_seq_free(&s);
        result = r;
        goto out;
    }
    /* no type: the keywords say which */
    static const char *const obj_kw[] = {"properties", "required", "additionalProperties", NULL};
    static const char *const arr_kw[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
    static const char *const str_kw[] = {"minLength", "maxLength", "format", NULL};
    static const char *const num_kw[] = {"minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum", NULL};
    int kinds = has_any(schema, obj_kw) + has_any(schema, arr_kw) + has_any(schema, str_kw) +
                has_any(schema, num_kw);
    if (kinds > 1) {
        result = fail(st, err, SPLASH_ERR_UNSUPPORTED, path,
                      "keywords of several types without "
                      "\"%s\"",
                      "type");
        goto out;
    }
    if (has_any(schema, obj_kw))
        result = gen_object(j, schema, path, err, st);
    else if (has_any(schema, arr_kw))
        result = gen_array(j, schema, path, err, st);
    else if (has_any(schema, str_kw))
        result = gen_string(j, schema, path, err, st);
    else if (has_any(schema, num_kw))
        result = gen_number(j, schema, 0, path, err, st);
    else
        result = value_rule(j);
out:
    j->depth--;
    return result;
}

/* ==== raw strings (tool-call values) ======================================================== */

/* text without the sequence stop, then stop: a KMP automaton, a rule per matched
 * prefix of stop. stop is ASCII. */
static uint32_t raw_until(struct json_gen *j, const char *stop, size_t n)
{
    struct gram_builder *b = j->b;
    struct gram_seq s = {0};
    struct gram_class ascii = {{0}};
    for (unsigned x = 1; x < 0x80; x++)
        ascii.w[x >> 6] |= 1ull << (x & 63);
    if (n == 0) {
        /* any text: raw ::= char raw | "" */
        uint32_t raw = gram_rule_new(b);
        add_char_alts(j, raw, raw, 1, &ascii);
        gram_alt_add(b, raw, &s);
        gram_seq_free(&s);
        return raw;
    }
    uint32_t st[64];
    size_t fail_of[64];
    if (n > 63)
        n = 63;
    for (size_t k = 0; k < n; k++)
        st[k] = gram_rule_new(b);
    /* failure function */
    fail_of[0] = 0;
    for (size_t k = 1, q = 0; k < n; k++) {
        while (q && stop[k] != stop[q])
            q = fail_of[q - 1];
        if (stop[k] == stop[q])
            q++;
        fail_of[k] = q;
    }
    struct gram_class none = {{0}};
    uint32_t mb = gram_rule_new(b);
    add_char_alts(j, mb, st[0], 1, &none);
    for (size_t k = 0; k < n; k++) {
        /* next state for each ASCII byte from state k */
        uint32_t target[128];
        for (unsigned c = 1; c < 128; c++) {
            size_t q = k;
            while (q && (unsigned char)stop[q] != c)
                q = fail_of[q - 1];
            if ((unsigned char)stop[q] == c)
                q++;
            target[c] = (uint32_t)q;
        }
        /* group bytes by target state */
        for (size_t q = 0; q <= n; q++) {
            struct gram_class cls = {{0}};
            int any_c = 0;
            for (unsigned c = 1; c < 128; c++)
                if (target[c] == q) {
                    cls.w[c >> 6] |= 1ull << (c & 63);
                    any_c = 1;
                }
            if (!any_c)
                continue;
            gram_seq_reset(&s);
            gram_seq_class(b, &s, &cls);
            if (q < n)
                gram_seq_ref(b, &s, st[q]);
            gram_alt_add(b, st[k], &s);
        }
        /* a multi-byte character restarts the match (stop is ASCII) */
        gram_seq_reset(&s);
        gram_seq_ref(b, &s, mb);
        gram_alt_add(b, st[k], &s);
    }
    gram_seq_free(&s);
    return st[0];
}

uint32_t json_gen_raw_string(struct json_gen *j, const json_t *schema, const char *stop,
                             size_t n_stop, const char *path, struct splash_err *err,
                             enum splash_status *st)
{
    struct gram_builder *b = j->b;
    const json_t *type = json_object_get(schema, "type");
    const json_t *en = json_object_get(schema, "enum");
    const json_t *cn = json_object_get(schema, "const");
    int is_string = json_is_string(type) && !strcmp(json_string_value(type), "string");
    if (!is_string && !type && (en || cn)) {
        /* untyped literals: raw only when all are strings */
        const json_t *vals = en ? en : NULL;
        is_string = 1;
        for (size_t i = 0; vals && i < json_array_size(vals); i++)
            is_string &= json_is_string(json_array_get(vals, i));
        if (cn)
            is_string = json_is_string(cn);
    }
    if (!is_string)
        return GRAM_INF;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)schema, key, val)
    {
        if (!in_list(annotations, key) && !in_list(value_keywords, key))
            return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "unsupported keyword \"%s\"", key);
    }
    struct gram_seq s = {0};
    uint32_t r = gram_rule_new(b);
    if (en || cn) {
        size_t n = en ? json_array_size(en) : 1;
        for (size_t i = 0; i < n; i++) {
            const json_t *v = en ? json_array_get(en, i) : cn;
            if (!json_is_string(v))
                continue;
            const char *text = json_string_value(v);
            size_t len = json_string_length(v);
            if (memchr(text, 0, len) || (n_stop && len + n_stop <= 4096 && strstr(text, stop)))
                continue;
            gram_seq_reset(&s);
            gram_seq_lit(b, &s, text, len);
            gram_seq_lit(b, &s, stop, n_stop);
            gram_alt_add(b, r, &s);
        }
        gram_seq_free(&s);
        return r;
    }
    /* minLength and maxLength are not enforced on a raw value: it ends at the format's
     * closing text, which a length count would have to tell from the value's own
     * characters. Agents' tool schemas carry them often, and a request is better served
     * with the limit unchecked than refused. */
    const json_t *fmt = json_object_get(schema, "format");
    if (fmt) {
        uint32_t body = json_is_string(fmt) ? format_body(j, json_string_value(fmt)) : GRAM_INF;
        if (body == GRAM_INF)
            return fail(st, err, SPLASH_ERR_UNSUPPORTED, path, "format \"%s\" is not supported",
                        json_is_string(fmt) ? json_string_value(fmt) : "?");
        gram_seq_ref(b, &s, body);
        gram_seq_lit(b, &s, stop, n_stop);
        gram_alt_add(b, r, &s);
        gram_seq_free(&s);
        return r;
    }
    gram_seq_ref(b, &s, raw_until(j, stop, n_stop));
    gram_alt_add(b, r, &s);
    gram_seq_free(&s);
    return r;
}

/* ==== entry points ============================================================================ */

struct json_gen *json_gen_create(struct gram_builder *b, const json_t *root, unsigned flags)
{
    struct json_gen *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->b = b;
    j->root = root;
    j->flags = flags;
    j->r_ws = j->r_string = j->r_body = j->r_number = j->r_integer = j->r_value = j->r_bool =
        j->r_null = GRAM_INF;
    return j;
}

void json_gen_destroy(struct json_gen *j)
{
    if (!j)
        return;
    free(j->refs);
    free(j);
}

uint32_t json_gen_value(struct json_gen *j, const json_t *schema, const char *path,
                        struct splash_err *err, enum splash_status *st)
{
    return gen(j, schema, path, err, st);
}

enum splash_status splash_grammar_compile_json_schema(const json_t *schema, unsigned flags,
                                                      struct splash_grammar **out,
                                                      struct splash_err *err)
{
    struct gram_builder b;
    gram_builder_init(&b);
    enum splash_status st = SPLASH_OK;
    struct json_gen *j = json_gen_create(&b, schema, flags);
    if (!j) {
        gram_builder_free(&b);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "schema: out of memory");
    }
    uint32_t root = gen(j, schema, "schema", err, &st);
    json_gen_destroy(j);
    if (root == GRAM_INF && st == SPLASH_OK)
        st = b.nomem ? SPLASH_ERR_NOMEM : SPLASH_ERR_INTERNAL;
    if (st == SPLASH_OK)
        st = gram_finalize(&b, root, "schema", out, err);
    else if (b.nomem)
        st = gram_finalize(&b, root, "schema", out, err); /* reports size or memory */
    gram_builder_free(&b);
    return st;
}

enum splash_status splash_grammar_compile_json_object(struct splash_grammar **out,
                                                      struct splash_err *err)
{
    json_t *schema = json_pack("{s:s}", "type", "object");
    if (!schema)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "json_object: out of memory");
    enum splash_status st = splash_grammar_compile_json_schema(schema, 0, out, err);
    json_decref(schema);
    return st;
}
