/* Jinja2's lexer with trim_blocks and lstrip_blocks on: template text to tokens.
 *
 * Whitespace control is settled here, as Jinja2 settles it: {%- and -%} strip every blank
 * beside the tag, a block or comment tag alone on its line takes the line's indentation with
 * it (lstrip_blocks) and the newline after it (trim_blocks), and {%+ / +%} opt out. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/jinja_internal.h"

struct lexer {
    struct jj_arena *arena;
    const char *s;
    size_t n, pos;
    int line;
    struct jj_tokens *out;
    struct splash_err *err;
};

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_name_char(unsigned char c) { return is_name_start(c) || is_digit((char)c); }

static enum splash_status push(struct lexer *lx, struct jj_token t)
{
    struct jj_tokens *o = lx->out;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        struct jj_token *items = jj_arena_alloc(lx->arena, cap * sizeof *items);
        if (!items)
            return splash_err_set(lx->err, SPLASH_ERR_NOMEM, "template: out of memory");
        if (o->n)
            memcpy(items, o->items, o->n * sizeof *items);
        o->items = items;
        o->cap = cap;
    }
    o->items[o->n++] = t;
    return SPLASH_OK;
}

static int count_lines(const char *p, size_t n)
{
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += p[i] == '\n';
    return lines;
}

/* ---- data between tags ---------------------------------------------------------------------- */

/* Applies the opening tag's whitespace control to the text before it and emits the text. */
static enum splash_status emit_data(struct lexer *lx, const char *text, size_t len, char sign,
                                    bool lstrip_applies, bool line_starting, int line)
{
    if (sign == '-') {
        while (len > 0 && is_ws(text[len - 1]))
            len--;
    } else if (sign != '+' && lstrip_applies) {
        size_t l_pos = len;
        while (l_pos > 0 && text[l_pos - 1] != '\n')
            l_pos--;
        if ((l_pos > 0 || line_starting) && l_pos < len) {
            bool blank = true;
            for (size_t i = l_pos; i < len; i++)
                if (!is_ws(text[i]))
                    blank = false;
            if (blank)
                len = l_pos;
        }
    }
    if (len == 0)
        return SPLASH_OK;
    return push(lx, (struct jj_token){.kind = JT_DATA, .line = line, .p = text, .n = len});
}

/* ---- inside tags ---------------------------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes a string literal's body as Python's unicode-escape does. */
static enum splash_status lex_string(struct lexer *lx, char quote)
{
    size_t start = ++lx->pos;
    int line = lx->line;
    while (lx->pos < lx->n && lx->s[lx->pos] != quote) {
        if (lx->s[lx->pos] == '\\' && lx->pos + 1 < lx->n)
            lx->pos++;
        lx->pos++;
    }
    if (lx->pos >= lx->n)
        return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: unexpected end "
                              "of string", line);
    size_t end = lx->pos++;
    const char *s = lx->s + start;
    size_t n = end - start;
    lx->line += count_lines(s, n);
    /* escapes only shrink the text, except \N, which stays as written */
    char *o = jj_arena_alloc(lx->arena, n + 1);
    if (!o)
        return splash_err_set(lx->err, SPLASH_ERR_NOMEM, "template: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            o[k++] = s[i];
            continue;
        }
        char e = s[++i];
        switch (e) {
        case '\n': break; /* line continuation */
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'v': o[k++] = '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
            size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            bool ok = i + digits < n;
            for (size_t d = 0; ok && d < digits; d++) {
                int h = hexval(s[i + 1 + d]);
                if (h < 0)
                    ok = false;
                else
                    cp = cp * 16 + (uint32_t)h;
            }
            if (!ok || cp > 0x10FFFF)
                return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: bad "
                                      "\\%c escape in a string", line, e);
            i += digits;
            k += put_utf8(o + k, cp);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int d = 0; d < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; d++)
                    cp = cp * 8 + (uint32_t)(s[++i] - '0');
                k += put_utf8(o + k, cp);
            } else {
                o[k++] = '\\';
                o[k++] = e;
            }
        }
    }
    o[k] = 0;
    return push(lx, (struct jj_token){.kind = JT_STRING, .line = line, .p = o, .n = k});
}

static size_t scan_digits(const char *s, size_t n, size_t i)
{
    /* (\d+_)*\d+ */
    while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1]) &&
                                        i > 0 && is_digit(s[i - 1]))))
        i++;
    return i;
}

static enum splash_status lex_number(struct lexer *lx, bool after_dot)
{
    const char *s = lx->s;
    size_t i = scan_digits(s, lx->n, lx->pos);
    bool is_float = false;
    if (!after_dot && i + 1 < lx->n && s[i] == '.' && is_digit(s[i + 1])) {
        i = scan_digits(s, lx->n, i + 1);
        is_float = true;
    }
    if (!after_dot && i < lx->n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < lx->n && (s[j] == '+' || s[j] == '-'))
            j++;
        if (j < lx->n && is_digit(s[j])) {
            i = scan_digits(s, lx->n, j);
            is_float = true;
        }
    }
    char tmp[128];
    size_t k = 0;
    for (size_t j = lx->pos; j < i && k + 1 < sizeof tmp; j++)
        if (s[j] != '_')
            tmp[k++] = s[j];
    tmp[k] = 0;
    struct jj_token t = {.line = lx->line, .p = s + lx->pos, .n = i - lx->pos};
    if (is_float) {
        t.kind = JT_FLOAT;
        t.f = strtod(tmp, NULL);
    } else {
        t.kind = JT_INT;
        errno = 0;
        unsigned long long v = strtoull(tmp, NULL, 10);
        if (errno || v > INT64_MAX)
            return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: integer "
                                  "literal too large", lx->line);
        t.i = (int64_t)v;
    }
    lx->pos = i;
    return push(lx, t);
}

static const char *const operators[] = {
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")",
    "{", "}", "<", ">", "=", ".", ":", "|", ",", ";",
};

/* Tokenizes one tag's inside up to and including its end; sets *line_starting for the text
 * after it. */
static enum splash_status lex_tag(struct lexer *lx, bool is_var, bool *line_starting)
{
    char stack[256];
    size_t depth = 0;
    enum splash_status st;
    for (;;) {
        while (lx->pos < lx->n && is_ws(lx->s[lx->pos])) {
            lx->line += lx->s[lx->pos] == '\n';
            lx->pos++;
        }
        if (lx->pos >= lx->n)
            return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: unexpected "
                                  "end of template, expected '%s'", lx->line,
                                  is_var ? "}}" : "%}");
        const char *p = lx->s + lx->pos;
        size_t left = lx->n - lx->pos;
        if (depth == 0) {
            const char *close = is_var ? "}}" : "%}";
            char sign = 0;
            size_t len = 0;
            if (left >= 3 && p[0] == '-' && memcmp(p + 1, close, 2) == 0)
                sign = '-', len = 3;
            else if (!is_var && left >= 3 && p[0] == '+' && memcmp(p + 1, close, 2) == 0)
                sign = '+', len = 3;
            else if (left >= 2 && memcmp(p, close, 2) == 0)
                len = 2;
            if (len) {
                int line = lx->line;
                lx->pos += len;
                *line_starting = false;
                if (sign == '-') {
                    while (lx->pos < lx->n && is_ws(lx->s[lx->pos])) {
                        *line_starting = lx->s[lx->pos] == '\n';
                        lx->line += lx->s[lx->pos] == '\n';
                        lx->pos++;
                    }
                } else if (!sign && !is_var && lx->pos < lx->n && lx->s[lx->pos] == '\n') {
                    lx->pos++; /* trim_blocks */
                    lx->line++;
                    *line_starting = true;
                }
                return push(lx, (struct jj_token){.kind = is_var ? JT_VAR_END : JT_BLOCK_END,
                                                  .line = line});
            }
        }
        char c = *p;
        if (c == '\'' || c == '"') {
            if ((st = lex_string(lx, c)))
                return st;
            continue;
        }
        if (is_digit(c)) {
            bool after_dot = lx->out->n > 0 && lx->out->items[lx->out->n - 1].kind == JT_OP &&
                             lx->out->items[lx->out->n - 1].p[0] == '.';
            if ((st = lex_number(lx, after_dot)))
                return st;
            continue;
        }
        if (is_name_start((unsigned char)c)) {
            size_t i = lx->pos;
            while (i < lx->n && is_name_char((unsigned char)lx->s[i]))
                i++;
            st = push(lx, (struct jj_token){.kind = JT_NAME, .line = lx->line, .p = p,
                                            .n = i - lx->pos});
            lx->pos = i;
            if (st)
                return st;
            continue;
        }
        size_t oplen = 0;
        for (size_t k = 0; k < sizeof operators / sizeof *operators; k++) {
            size_t l = strlen(operators[k]);
            if (l <= left && memcmp(p, operators[k], l) == 0) {
                oplen = l;
                break;
            }
        }
        if (!oplen)
            return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: unexpected "
                                  "char '%c'", lx->line, c);
        if (oplen == 1 && (c == '(' || c == '[' || c == '{')) {
            if (depth == sizeof stack)
                return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: "
                                      "brackets nested too deep", lx->line);
            stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (oplen == 1 && (c == ')' || c == ']' || c == '}')) {
            if (depth == 0 || stack[depth - 1] != c)
                return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: "
                                      "unexpected '%c'", lx->line, c);
            depth--;
        }
        st = push(lx, (struct jj_token){.kind = JT_OP, .line = lx->line, .p = p, .n = oplen});
        lx->pos += oplen;
        if (st)
            return st;
    }
}

/* At "{%" + sign: is this {% raw %}? Sets *after past the tag when it is. */
static bool match_word_tag(const char *s, size_t n, size_t i, const char *word, size_t *after,
                           char *end_sign)
{
    while (i < n && is_ws(s[i]))
        i++;
    size_t wl = strlen(word);
    if (n - i < wl || memcmp(s + i, word, wl) != 0)
        return false;
    i += wl;
    if (i < n && is_name_char((unsigned char)s[i]))
        return false;
    while (i < n && is_ws(s[i]))
        i++;
    *end_sign = 0;
    if (i + 3 <= n && (s[i] == '-' || s[i] == '+') && s[i + 1] == '%' && s[i + 2] == '}') {
        *end_sign = s[i];
        *after = i + 3;
        return true;
    }
    if (i + 2 <= n && s[i] == '%' && s[i + 1] == '}') {
        *after = i + 2;
        return true;
    }
    return false;
}

static enum splash_status lex_raw(struct lexer *lx, size_t after, char end_sign,
                                  bool *line_starting)
{
    const char *s = lx->s;
    lx->line += count_lines(s + lx->pos, after - lx->pos);
    lx->pos = after;
    if (end_sign == '-')
        while (lx->pos < lx->n && is_ws(s[lx->pos]))
            lx->line += s[lx->pos++] == '\n';
    /* find {% endraw %} */
    for (size_t i = lx->pos; i + 1 < lx->n; i++) {
        if (s[i] != '{' || s[i + 1] != '%')
            continue;
        size_t j = i + 2;
        char sign = 0;
        if (j < lx->n && (s[j] == '-' || s[j] == '+'))
            sign = s[j++];
        size_t end;
        char esign;
        if (!match_word_tag(s, lx->n, j, "endraw", &end, &esign))
            continue;
        enum splash_status st = emit_data(lx, s + lx->pos, i - lx->pos, sign, true,
                                          *line_starting, lx->line);
        if (st)
            return st;
        lx->line += count_lines(s + lx->pos, end - lx->pos);
        lx->pos = end;
        *line_starting = false;
        if (esign == '-') {
            while (lx->pos < lx->n && is_ws(s[lx->pos])) {
                *line_starting = s[lx->pos] == '\n';
                lx->line += s[lx->pos++] == '\n';
            }
        } else if (!esign && lx->pos < lx->n && s[lx->pos] == '\n') {
            lx->pos++;
            lx->line++;
            *line_starting = true;
        }
        return SPLASH_OK;
    }
    return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: missing end of raw "
                          "directive", lx->line);
}

static enum splash_status lex_comment(struct lexer *lx, bool *line_starting)
{
    const char *s = lx->s;
    for (size_t i = lx->pos; i + 1 < lx->n; i++) {
        if (s[i] != '#' || s[i + 1] != '}')
            continue;
        char sign = i > lx->pos && (s[i - 1] == '-' || s[i - 1] == '+') ? s[i - 1] : 0;
        lx->line += count_lines(s + lx->pos, i + 2 - lx->pos);
        lx->pos = i + 2;
        *line_starting = false;
        if (sign == '-') {
            while (lx->pos < lx->n && is_ws(s[lx->pos])) {
                *line_starting = s[lx->pos] == '\n';
                lx->line += s[lx->pos++] == '\n';
            }
        } else if (!sign && lx->pos < lx->n && s[lx->pos] == '\n') {
            lx->pos++;
            lx->line++;
            *line_starting = true;
        }
        return SPLASH_OK;
    }
    return splash_err_set(lx->err, SPLASH_ERR_INVALID, "template: line %d: missing end of "
                          "comment tag", lx->line);
}

/* Jinja2 reads \r\n, \r and \n alike and drops one trailing newline (keep_trailing_newline
 * off). */
static char *normalize_newlines(struct jj_arena *arena, const char *src, size_t len,
                                size_t *out_len)
{
    char *o = jj_arena_alloc(arena, len + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            o[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            o[k++] = src[i];
        }
    }
    if (k > 0 && o[k - 1] == '\n')
        k--;
    o[k] = 0;
    *out_len = k;
    return o;
}

enum splash_status jj_lex(struct jj_arena *arena, const char *src, size_t len,
                          struct jj_tokens *out, struct splash_err *err)
{
    struct lexer lx = {.arena = arena, .line = 1, .out = out, .err = err};
    lx.s = normalize_newlines(arena, src, len, &lx.n);
    if (!lx.s)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "template: out of memory");
    bool line_starting = true;
    enum splash_status st;
    while (lx.pos < lx.n) {
        const char *s = lx.s;
        size_t i = lx.pos;
        while (i + 1 < lx.n && !(s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' ||
                                                  s[i + 1] == '#')))
            i++;
        if (i + 1 >= lx.n) { /* plain text to the end */
            if ((st = emit_data(&lx, s + lx.pos, lx.n - lx.pos, 0, false, line_starting,
                                lx.line)))
                return st;
            break;
        }
        char kind = s[i + 1];
        char sign = 0;
        size_t j = i + 2;
        if (j < lx.n && (s[j] == '-' || s[j] == '+'))
            sign = s[j++];
        int data_line = lx.line;
        lx.line += count_lines(s + lx.pos, i - lx.pos);
        if ((st = emit_data(&lx, s + lx.pos, i - lx.pos, sign, kind != '{', line_starting,
                            data_line)))
            return st;
        lx.pos = j;
        if (kind == '#') {
            if ((st = lex_comment(&lx, &line_starting)))
                return st;
            continue;
        }
        size_t after;
        char end_sign;
        if (kind == '%' && match_word_tag(s, lx.n, j, "raw", &after, &end_sign)) {
            if ((st = lex_raw(&lx, after, end_sign, &line_starting)))
                return st;
            continue;
        }
        bool is_var = kind == '{';
        if ((st = push(&lx, (struct jj_token){.kind = is_var ? JT_VAR_BEGIN : JT_BLOCK_BEGIN,
                                              .line = lx.line})))
            return st;
        if ((st = lex_tag(&lx, is_var, &line_starting)))
            return st;
    }
    return push(&lx, (struct jj_token){.kind = JT_EOF, .line = lx.line});
}
