/* Internals shared by the Jinja lexer, parser, values, filters and renderer (server/chat/ only). */
#ifndef SPLASH_SERVER_CHAT_JINJA_INTERNAL_H
#define SPLASH_SERVER_CHAT_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/chat/jinja.h"

/* ---- arena ------------------------------------------------------------------------------- */

/* Bump allocator: a template's AST lives in one, each render's values in another. */
struct jj_arena {
    struct jj_arena_block *head;
    size_t total; /* bytes taken from malloc */
    size_t limit; /* 0 = unlimited; past it jj_alloc returns NULL */
};

void jj_arena_init(struct jj_arena *a, size_t limit);
void jj_arena_free(struct jj_arena *a);
void *jj_arena_alloc(struct jj_arena *a, size_t size); /* zeroed, 16-aligned; NULL past limit */
void *jj_arena_alloc_raw(struct jj_arena *a, size_t size); /* not zeroed */
char *jj_arena_strndup(struct jj_arena *a, const char *s, size_t n);

/* ---- values ------------------------------------------------------------------------------ */

enum jj_kind {
    JJ_UNDEFINED = 0,
    JJ_NONE,
    JJ_BOOL,
    JJ_INT,
    JJ_FLOAT,
    JJ_STR,
    JJ_LIST,  /* list or tuple (u.list->is_tuple) */
    JJ_DICT,  /* ordered mapping */
    JJ_NS,    /* namespace(): the one mutable object */
    JJ_FUNC,  /* macro, caller, global function or bound method */
    JJ_LOOP,  /* the for-loop's `loop` */
};

struct jj_str {
    const char *p;
    size_t n;
};

struct jj_undef; /* why a value is undefined, for the error message */
struct jj_list;
struct jj_dict;
struct jj_func;
struct jj_loop;

struct jj_value {
    enum jj_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct jj_str s;
        struct jj_list *list;
        struct jj_dict *dict;
        struct jj_func *fn;
        struct jj_loop *loop;
        const struct jj_undef *undef;
    } u;
};

struct jj_list {
    size_t n, cap;
    bool is_tuple;
    struct jj_value *items;
};

struct jj_dict {
    size_t n, cap;
    struct jj_value *keys;
    struct jj_value *vals;
};

enum jj_undef_style {
    JJ_UNDEF_NAME,      /* 'x' is undefined */
    JJ_UNDEF_ATTR,      /* 'dict object' has no attribute 'x' */
    JJ_UNDEF_ELEMENT,   /* list object has no element 0 */
    JJ_UNDEF_HINT,      /* free text */
};

struct jj_undef {
    enum jj_undef_style style;
    const char *obj_type; /* "dict object", "None" ... */
    struct jj_value key;  /* the name or element */
    const char *hint;
};

/* ---- AST --------------------------------------------------------------------------------- */

enum jj_node_kind {
    /* statements */
    JN_TEXT,
    JN_OUTPUT,
    JN_IF,
    JN_FOR,
    JN_SET,
    JN_SET_BLOCK,
    JN_MACRO,
    JN_CALL_BLOCK,
    JN_FILTER_BLOCK,
    JN_WITH,
    JN_SCOPE, /* block / generation: a body rendered in place */
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JN_CONST,
    JN_NAME,
    JN_GETATTR,
    JN_GETITEM,
    JN_SLICE,
    JN_CALL,
    JN_FILTER,
    JN_TEST,
    JN_NEG,
    JN_POS,
    JN_NOT,
    JN_BINARY,
    JN_AND,
    JN_OR,
    JN_COMPARE,
    JN_COND,
    JN_LIST,
    JN_TUPLE,
    JN_DICT,
};

enum jj_binop {
    JJ_OP_ADD = 1,
    JJ_OP_SUB,
    JJ_OP_MUL,
    JJ_OP_DIV,
    JJ_OP_FLOORDIV,
    JJ_OP_MOD,
    JJ_OP_POW,
    JJ_OP_CONCAT,
    JJ_OP_EQ,
    JJ_OP_NE,
    JJ_OP_LT,
    JJ_OP_LE,
    JJ_OP_GT,
    JJ_OP_GE,
    JJ_OP_IN,
    JJ_OP_NOTIN,
};

struct jj_nodes {
    struct jj_node **items;
    size_t n;
};

/* Field use by kind:
 *   TEXT      value = text
 *   OUTPUT    a = expr
 *   IF        a = cond, body, orelse (an elif is an IF alone in orelse)
 *   FOR       targets (NAMEs), a = iterable, b = filter condition or NULL, body, orelse
 *   SET       targets (NAMEs or GETATTRs), a = value
 *   SET_BLOCK targets (one), args = filters (FILTERs with a NULL operand), body
 *   MACRO     name, targets = params, args = defaults (NULL where none), body, flags
 *   CALL_BLOCK a = the CALL, targets = caller params, args = defaults, body
 *   FILTER_BLOCK args = filters, body
 *   WITH      targets, args = values, body
 *   SCOPE     body
 *   CONST     value;  NAME name;  GETATTR a, name;  GETITEM a, b;  SLICE a, b, c, d
 *   CALL      a = callee, args, kwnames (NAMEs), kwargs
 *   FILTER    name, a = operand, args, kwnames, kwargs
 *   TEST      name, a = operand, args, flags = negated
 *   NEG/POS/NOT a;  BINARY/AND/OR op, a, b
 *   COMPARE   a = first, args = operands, ops[args.n]
 *   COND      a = condition, b = then, c = else or NULL
 *   LIST/TUPLE args;  DICT args = keys, kwargs = values */
struct jj_node {
    enum jj_node_kind kind;
    int line;
    int op;
    unsigned flags;
    const char *name; /* interned, NUL-terminated */
    struct jj_node *a, *b, *c, *d;
    struct jj_nodes body, orelse, targets, args, kwnames, kwargs;
    int *ops;
    struct jj_value value;
};

#define JJ_MACRO_USES_VARARGS 1u
#define JJ_MACRO_USES_KWARGS 2u
#define JJ_MACRO_USES_CALLER 4u
#define JJ_TEST_NEGATED 1u

struct splash_jinja_template {
    struct jj_arena arena;
    struct jj_nodes body;
    const char **names; /* interned identifiers */
    size_t n_names, cap_names;
};

/* Returns the interned copy of name (NULL on allocation failure). */
const char *jj_intern(struct splash_jinja_template *t, const char *name, size_t n);
/* Looks a name up without interning it (NULL when the template never uses it). */
const char *jj_intern_find(const struct splash_jinja_template *t, const char *name, size_t n);

/* ---- lexer ------------------------------------------------------------------------------- */

enum jj_tok_kind {
    JT_EOF,
    JT_DATA,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP,
};

struct jj_token {
    enum jj_tok_kind kind;
    int line;
    const char *p; /* NAME, OP: source text; DATA, STRING: decoded text (arena) */
    size_t n;
    int64_t i;
    double f;
};

struct jj_tokens {
    struct jj_token *items;
    size_t n, cap;
};

/* Tokenizes src with trim_blocks and lstrip_blocks on, as transformers configures Jinja. */
enum splash_status jj_lex(struct jj_arena *arena, const char *src, size_t len,
                          struct jj_tokens *out, struct splash_err *err);

/* ---- parser ------------------------------------------------------------------------------ */

enum splash_status jj_parse(struct splash_jinja_template *t, const struct jj_tokens *toks,
                            struct splash_err *err);

/* ---- rendering state ----------------------------------------------------------------------- */

struct jj_scope {
    struct jj_scope *parent;
    size_t n, cap;
    const char **names;
    struct jj_value *vals;
};

struct jj_buf {
    char *p;
    size_t n, cap;
};

/* How a render failed (the status splash_jinja_render returns follows from it). */
enum jj_fail_kind {
    JJ_FAIL_RAISED,  /* raise_exception(msg): msg is the template's own text */
    JJ_FAIL_RUNTIME, /* what Python would raise: undefined attribute, type error ... */
    JJ_FAIL_LIMIT,   /* a sandbox bound was reached */
    JJ_FAIL_NOMEM,
};

struct jj_ctx {
    const struct splash_jinja_template *tpl;
    struct jj_arena arena;
    struct jj_scope *globals;
    struct jj_buf *out;
    struct splash_jinja_limits limits;
    int64_t now;
    uint64_t steps;
    unsigned depth;
    size_t output_total;
    struct splash_err *err;     /* the render's caller's: why it failed */
    char *message;              /* and its whole text, when the caller asked (may be NULL) */
    size_t message_size;
    enum jj_fail_kind fail_kind; /* and how, for the status */
    jmp_buf fail;
};

struct jj_loop {
    const struct jj_list *items;
    int64_t index0;
    int64_t depth0;
    bool has_changed;
    struct jj_value last_changed;
};

enum jj_func_kind {
    JJ_FN_MACRO,
    JJ_FN_CALLER,
    JJ_FN_GLOBAL, /* id = enum jj_global */
    JJ_FN_METHOD, /* self.method(...) with name */
    JJ_FN_LOOP_CYCLE,
    JJ_FN_LOOP_CHANGED,
};

struct jj_func {
    enum jj_func_kind kind;
    int id;
    const char *name;
    const struct jj_node *node; /* MACRO or CALL_BLOCK */
    struct jj_scope *closure;
    struct jj_value self;
    struct jj_func *caller; /* the caller a CALL_BLOCK passes its macro */
};

/* Call arguments, already evaluated. */
struct jj_args {
    struct jj_value *pos;
    size_t n_pos;
    const char **kw_names;
    struct jj_value *kw;
    size_t n_kw;
};

/* Errors unwind to the render entry point. */
_Noreturn void jj_fail(struct jj_ctx *c, enum jj_fail_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn void jj_fail_undefined(struct jj_ctx *c, struct jj_value v);
void *jj_alloc(struct jj_ctx *c, size_t size); /* fails the render past the memory limit */
void jj_step(struct jj_ctx *c);                 /* counts a loop iteration */

/* ---- values (jinja_value.c) ---------------------------------------------------------------- */

static inline struct jj_value jj_none(void) { return (struct jj_value){.kind = JJ_NONE}; }
static inline struct jj_value jj_bool(bool b)
{
    return (struct jj_value){.kind = JJ_BOOL, .u.b = b};
}
static inline struct jj_value jj_int(int64_t i)
{
    return (struct jj_value){.kind = JJ_INT, .u.i = i};
}
static inline struct jj_value jj_float(double f)
{
    return (struct jj_value){.kind = JJ_FLOAT, .u.f = f};
}
static inline struct jj_value jj_str(const char *p, size_t n)
{
    return (struct jj_value){.kind = JJ_STR, .u.s = {p, n}};
}
static inline struct jj_value jj_undefined_plain(void) { return (struct jj_value){0}; }

struct jj_value jj_undefined_name(struct jj_ctx *c, const char *name);
struct jj_value jj_undefined_attr(struct jj_ctx *c, struct jj_value obj, struct jj_value key);
struct jj_value jj_undefined_hint(struct jj_ctx *c, const char *hint);
/* The message Jinja2's UndefinedError carries for v. */
void jj_undefined_message(const struct jj_value *v, char *buf, size_t size);

struct jj_list *jj_list_new(struct jj_ctx *c, size_t cap);
void jj_list_push(struct jj_ctx *c, struct jj_list *l, struct jj_value v);
struct jj_value jj_list_value(struct jj_list *l);
struct jj_dict *jj_dict_new(struct jj_ctx *c, size_t cap);
void jj_dict_set(struct jj_ctx *c, struct jj_dict *d, struct jj_value key, struct jj_value v);
/* Finds key; NULL when absent. */
struct jj_value *jj_dict_get(const struct jj_dict *d, struct jj_value key);
struct jj_value *jj_dict_get_str(const struct jj_dict *d, const char *key, size_t n);
struct jj_value jj_dict_value(struct jj_dict *d);

/* Python semantics. */
bool jj_truthy(struct jj_value v);
bool jj_equal(struct jj_value a, struct jj_value b);
/* <0, 0, >0; fails the render on types Python cannot order. */
int jj_compare(struct jj_ctx *c, struct jj_value a, struct jj_value b);
/* Python type names: "str", "int", "NoneType", "list" ... */
const char *jj_type_name(struct jj_value v);
/* Jinja2's object_type_repr: "dict object", "None" ... */
const char *jj_object_type(struct jj_value v);
bool jj_is_number(struct jj_value v); /* bool, int or float */
double jj_as_double(struct jj_value v);

void jj_buf_put(struct jj_ctx *c, struct jj_buf *b, const char *p, size_t n);
void jj_buf_putc(struct jj_ctx *c, struct jj_buf *b, char ch);
/* The buffer's bytes as a string value (no copy); the buffer is emptied. */
struct jj_value jj_buf_to_str(struct jj_ctx *c, struct jj_buf *b);

/* str(v) and repr(v) as Python writes them, appended to b. */
void jj_str_into(struct jj_ctx *c, struct jj_buf *b, struct jj_value v);
void jj_repr_into(struct jj_ctx *c, struct jj_buf *b, struct jj_value v);
/* str(v) as a string value (no copy for strings). */
struct jj_value jj_to_str(struct jj_ctx *c, struct jj_value v);
/* Python's repr of a float ("1.0", "1e+16", "inf"). */
void jj_format_float(double f, char *buf, size_t size);

/* JSON input to values; strings point into the json_t, which outlives the render. */
struct jj_value jj_from_json(struct jj_ctx *c, const void *json);

/* Makes a list from anything iterable (fails on others): dict keys, string characters ... */
struct jj_list *jj_iterate(struct jj_ctx *c, struct jj_value v);
int64_t jj_length(struct jj_ctx *c, struct jj_value v);

/* ---- json (jinja_json.c) ------------------------------------------------------------------ */

struct jj_json_opts {
    bool ensure_ascii;
    bool sort_keys;
    bool has_indent;
    struct jj_str indent; /* spaces or the given string */
    struct jj_str item_sep, key_sep;
};

/* json.dumps(v, ...) into b; fails the render on values JSON cannot hold. */
void jj_tojson(struct jj_ctx *c, struct jj_buf *b, struct jj_value v,
               const struct jj_json_opts *opts);

/* ---- filters, tests, methods, globals ------------------------------------------------------ */

struct jj_value jj_call_filter(struct jj_ctx *c, const char *name, struct jj_value v,
                               struct jj_args *args, int line);
bool jj_call_test(struct jj_ctx *c, const char *name, struct jj_value v, struct jj_args *args,
                  int line);
bool jj_filter_exists(const char *name);
bool jj_test_exists(const char *name);
/* obj.name as Jinja2 resolves it: a method of str, dict or list, else an item. */
struct jj_value jj_getattr(struct jj_ctx *c, struct jj_value obj, const char *name, size_t n);
/* obj[key]: an item, else an attribute. */
struct jj_value jj_getitem(struct jj_ctx *c, struct jj_value obj, struct jj_value key);
struct jj_value jj_call_method(struct jj_ctx *c, struct jj_func *fn, struct jj_args *args);
/* A global function (range, namespace, raise_exception, strftime_now, dict, ...) or undefined. */
bool jj_global_lookup(struct jj_ctx *c, const char *name, struct jj_value *out);
struct jj_value jj_call_global(struct jj_ctx *c, struct jj_func *fn, struct jj_args *args);
/* Calls any callable value (macro, global, method ...), defined in jinja_render.c. */
struct jj_value jj_call_value(struct jj_ctx *c, struct jj_value callee, struct jj_args *args);

/* Python's str.replace and the % operator on a string. */
struct jj_value jj_py_replace(struct jj_ctx *c, struct jj_str s, struct jj_str old,
                              struct jj_str new, int64_t count);
struct jj_value jj_percent_format(struct jj_ctx *c, struct jj_str fmt, struct jj_value args);

/* Argument helpers: the i-th positional or the keyword name, else NULL. */
struct jj_value *jj_arg(struct jj_args *a, size_t i, const char *name);

/* ---- strings (jinja_strings.c) ------------------------------------------------------------ */

/* The code point at p (its length in *len); an invalid byte reads as itself, length 1. */
int32_t jj_utf8_decode(const char *p, size_t n, size_t *len);
/* Python 3.11's str.isprintable for one code point (what repr() leaves unescaped). */
bool jj_cp_printable(int32_t cp);
enum jj_cp_class {
    JJ_CP_ALPHA, /* str.isalpha */
    JJ_CP_DIGIT, /* str.isdigit */
    JJ_CP_ALNUM, /* str.isalnum */
    JJ_CP_WORD,  /* re's \w */
    JJ_CP_LOWER, /* Unicode Lowercase, as str.islower reads it */
    JJ_CP_UPPER, /* Unicode Uppercase */
    JJ_CP_TITLE, /* titlecase (Lt) */
    JJ_CP_SPACE, /* str.isspace */
};
/* Python 3.11's character classes for one code point. */
bool jj_cp_class(int32_t cp, enum jj_cp_class k);
/* str.splitlines(): every Python line boundary, no ends kept. */
struct jj_list *jj_splitlines(struct jj_ctx *c, struct jj_str s);
/* Python's str.isspace for the code point at p (its length in *len). */
bool jj_utf8_space(const char *p, size_t n, size_t *len);
/* Python str.strip/lstrip/rstrip with chars or whitespace (chars NULL). */
struct jj_str jj_strip(struct jj_str s, const struct jj_str *chars, bool left, bool right);
/* mode: 0 lower, 1 upper, 2 Jinja's title filter, 3 capitalize, 4 Python's str.title */
struct jj_value jj_str_case(struct jj_ctx *c, struct jj_str s, int mode);
size_t jj_utf8_count(struct jj_str s);
/* str.isupper() (upper) or str.islower() */
bool jj_str_all_case(struct jj_str s, bool upper);

#endif
