/* Jinja2's grammar, recursive descent over the lexer's tokens, into the AST of jinja_internal.h.
 * Operator precedence and the statement forms follow Jinja2's own parser; the tags a sandboxed
 * chat template cannot use (include, import, extends) are refused with the line. */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "server/chat/jinja_internal.h"

#define MAX_NESTING 200

struct parser {
    struct splash_jinja_template *t;
    const struct jj_tokens *toks;
    size_t pos;
    struct splash_err *err;
    jmp_buf fail;
    int depth;
    int loop_depth;
    struct jj_node *macro; /* innermost macro being parsed */
};

/* ---- helpers ------------------------------------------------------------------------------ */

static const struct jj_token *cur(struct parser *p) { return &p->toks->items[p->pos]; }

static const struct jj_token *peek(struct parser *p, size_t k)
{
    size_t i = p->pos + k < p->toks->n ? p->pos + k : p->toks->n - 1;
    return &p->toks->items[i];
}

static void advance(struct parser *p)
{
    if (p->pos + 1 < p->toks->n)
        p->pos++;
}

static void describe(const struct jj_token *t, char *buf, size_t size)
{
    switch (t->kind) {
    case JT_EOF: snprintf(buf, size, "end of template"); break;
    case JT_DATA: snprintf(buf, size, "template data"); break;
    case JT_BLOCK_BEGIN: snprintf(buf, size, "'{%%'"); break;
    case JT_BLOCK_END: snprintf(buf, size, "end of statement block"); break;
    case JT_VAR_BEGIN: snprintf(buf, size, "'{{'"); break;
    case JT_VAR_END: snprintf(buf, size, "end of print statement"); break;
    case JT_STRING: snprintf(buf, size, "string"); break;
    case JT_INT: snprintf(buf, size, "integer"); break;
    case JT_FLOAT: snprintf(buf, size, "float"); break;
    default: snprintf(buf, size, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p);
    }
}

_Noreturn __attribute__((format(printf, 3, 4))) static void fail(struct parser *p, int line,
                                                                  const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    splash_err_set(p->err, SPLASH_ERR_INVALID, "template: line %d: %s", line, msg);
    longjmp(p->fail, 1);
}

_Noreturn static void fail_unexpected(struct parser *p, const char *expected)
{
    char got[64];
    describe(cur(p), got, sizeof got);
    if (expected)
        fail(p, cur(p)->line, "expected %s, got %s", expected, got);
    fail(p, cur(p)->line, "unexpected %s", got);
}

_Noreturn static void fail_nomem(struct parser *p)
{
    splash_err_set(p->err, SPLASH_ERR_NOMEM, "template: out of memory");
    longjmp(p->fail, 1);
}

static bool is_op(const struct jj_token *t, const char *op)
{
    return t->kind == JT_OP && t->n == strlen(op) && memcmp(t->p, op, t->n) == 0;
}

static bool is_name(const struct jj_token *t, const char *name)
{
    return t->kind == JT_NAME && t->n == strlen(name) && memcmp(t->p, name, t->n) == 0;
}

static bool skip_op(struct parser *p, const char *op)
{
    if (!is_op(cur(p), op))
        return false;
    advance(p);
    return true;
}

static bool skip_name(struct parser *p, const char *name)
{
    if (!is_name(cur(p), name))
        return false;
    advance(p);
    return true;
}

static void expect_op(struct parser *p, const char *op)
{
    if (!skip_op(p, op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", op);
        fail_unexpected(p, want);
    }
}

static void expect_block_end(struct parser *p)
{
    if (cur(p)->kind != JT_BLOCK_END)
        fail_unexpected(p, "end of statement block");
    advance(p);
}

static const char *intern_tok(struct parser *p, const struct jj_token *t)
{
    const char *s = jj_intern(p->t, t->p, t->n);
    if (!s)
        fail_nomem(p);
    return s;
}

static const char *expect_name(struct parser *p)
{
    if (cur(p)->kind != JT_NAME)
        fail_unexpected(p, "name");
    const char *s = intern_tok(p, cur(p));
    advance(p);
    return s;
}

static struct jj_node *node(struct parser *p, enum jj_node_kind kind, int line)
{
    struct jj_node *n = jj_arena_alloc(&p->t->arena, sizeof *n);
    if (!n)
        fail_nomem(p);
    n->kind = kind;
    n->line = line;
    return n;
}

static void push(struct parser *p, struct jj_nodes *l, struct jj_node *n)
{
    /* capacity is the next power of two, so grow when n is one */
    if (l->n == 0 || (l->n & (l->n - 1)) == 0) {
        size_t cap = l->n ? l->n * 2 : 1;
        struct jj_node **items = jj_arena_alloc(&p->t->arena, cap * sizeof *items);
        if (!items)
            fail_nomem(p);
        if (l->n)
            memcpy(items, l->items, l->n * sizeof *items);
        l->items = items;
    }
    l->items[l->n++] = n;
}

static void enter(struct parser *p)
{
    if (++p->depth > MAX_NESTING)
        fail(p, cur(p)->line, "expressions or blocks nested too deep");
}

static void leave(struct parser *p) { p->depth--; }

/* ---- expressions -------------------------------------------------------------------------- */

static struct jj_node *parse_expression(struct parser *p, bool with_condexpr);
static struct jj_node *parse_unary(struct parser *p, bool with_filter);
static struct jj_node *parse_primary(struct parser *p);
static struct jj_node *parse_postfix(struct parser *p, struct jj_node *n);
static struct jj_node *parse_filter_expr(struct parser *p, struct jj_node *n);

static bool tuple_end(struct parser *p, const char *extra_end)
{
    const struct jj_token *t = cur(p);
    if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || t->kind == JT_EOF || is_op(t, ")"))
        return true;
    return extra_end && is_name(t, extra_end);
}

static struct jj_node *parse_tuple(struct parser *p, bool with_condexpr, const char *extra_end,
                                   bool explicit_parens)
{
    int line = cur(p)->line;
    struct jj_node *tuple = node(p, JN_TUPLE, line);
    bool is_tuple = false;
    for (;;) {
        if (tuple->args.n)
            expect_op(p, ",");
        if (tuple_end(p, extra_end))
            break;
        push(p, &tuple->args, parse_expression(p, with_condexpr));
        if (is_op(cur(p), ","))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (tuple->args.n)
            return tuple->args.items[0];
        if (!explicit_parens)
            fail_unexpected(p, "an expression");
    }
    return tuple;
}

static struct jj_node *parse_call_args(struct parser *p, struct jj_node *call)
{
    expect_op(p, "(");
    bool first = true;
    while (!is_op(cur(p), ")")) {
        if (!first)
            expect_op(p, ",");
        first = false;
        if (is_op(cur(p), ")"))
            break;
        if (is_op(cur(p), "*") || is_op(cur(p), "**"))
            fail(p, cur(p)->line, "*args and **kwargs in calls are not supported");
        if (cur(p)->kind == JT_NAME && is_op(peek(p, 1), "=")) {
            struct jj_node *k = node(p, JN_NAME, cur(p)->line);
            k->name = expect_name(p);
            advance(p); /* = */
            push(p, &call->kwnames, k);
            push(p, &call->kwargs, parse_expression(p, true));
        } else {
            if (call->kwnames.n)
                fail(p, cur(p)->line, "positional argument follows keyword argument");
            push(p, &call->args, parse_expression(p, true));
        }
    }
    advance(p); /* ) */
    return call;
}

/* A dotted filter or test name: "a.b" is one name in Jinja2. */
static const char *parse_dotted_name(struct parser *p)
{
    const struct jj_token *t = cur(p);
    if (t->kind != JT_NAME)
        fail_unexpected(p, "name");
    const char *start = t->p;
    size_t end = (size_t)(t->p - start) + t->n;
    advance(p);
    while (is_op(cur(p), ".") && peek(p, 1)->kind == JT_NAME) {
        advance(p);
        end = (size_t)(cur(p)->p - start) + cur(p)->n;
        advance(p);
    }
    const char *s = jj_intern(p->t, start, end);
    if (!s)
        fail_nomem(p);
    return s;
}

static struct jj_node *parse_filter(struct parser *p, struct jj_node *operand, bool start_inline)
{
    while (is_op(cur(p), "|") || start_inline) {
        if (!start_inline)
            advance(p);
        start_inline = false;
        struct jj_node *f = node(p, JN_FILTER, cur(p)->line);
        f->name = parse_dotted_name(p);
        f->a = operand;
        if (is_op(cur(p), "("))
            parse_call_args(p, f);
        operand = f;
    }
    return operand;
}

static struct jj_node *parse_test(struct parser *p, struct jj_node *operand)
{
    struct jj_node *t = node(p, JN_TEST, cur(p)->line);
    advance(p); /* is */
    if (skip_name(p, "not"))
        t->flags |= JJ_TEST_NEGATED;
    t->name = parse_dotted_name(p);
    t->a = operand;
    const struct jj_token *c = cur(p);
    if (is_op(c, "(")) {
        parse_call_args(p, t);
    } else if ((c->kind == JT_NAME || c->kind == JT_STRING || c->kind == JT_INT ||
                c->kind == JT_FLOAT || is_op(c, "(") || is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is"))
            fail(p, c->line, "You cannot chain multiple tests with is");
        struct jj_node *arg = parse_postfix(p, parse_primary(p));
        push(p, &t->args, arg);
    }
    return t;
}

static struct jj_node *parse_filter_expr(struct parser *p, struct jj_node *n)
{
    for (;;) {
        if (is_op(cur(p), "|"))
            n = parse_filter(p, n, false);
        else if (is_name(cur(p), "is"))
            n = parse_test(p, n);
        else if (is_op(cur(p), "(")) {
            struct jj_node *call = node(p, JN_CALL, cur(p)->line);
            call->a = n;
            n = parse_call_args(p, call);
        } else
            return n;
    }
}

static struct jj_node *parse_subscribed(struct parser *p)
{
    int line = cur(p)->line;
    struct jj_node *slice_args[3] = {0};
    if (is_op(cur(p), ":")) {
        advance(p);
    } else {
        struct jj_node *e = parse_expression(p, true);
        if (!is_op(cur(p), ":"))
            return e;
        advance(p);
        slice_args[0] = e;
    }
    if (!is_op(cur(p), ":") && !is_op(cur(p), "]") && !is_op(cur(p), ","))
        slice_args[1] = parse_expression(p, true);
    if (is_op(cur(p), ":")) {
        advance(p);
        if (!is_op(cur(p), "]") && !is_op(cur(p), ","))
            slice_args[2] = parse_expression(p, true);
    }
    struct jj_node *s = node(p, JN_SLICE, line);
    s->b = slice_args[0];
    s->c = slice_args[1];
    s->d = slice_args[2];
    return s;
}

static struct jj_node *parse_postfix(struct parser *p, struct jj_node *n)
{
    for (;;) {
        const struct jj_token *t = cur(p);
        if (is_op(t, ".")) {
            advance(p);
            const struct jj_token *a = cur(p);
            if (a->kind == JT_NAME) {
                struct jj_node *g = node(p, JN_GETATTR, a->line);
                g->a = n;
                g->name = intern_tok(p, a);
                advance(p);
                n = g;
            } else if (a->kind == JT_INT) {
                struct jj_node *g = node(p, JN_GETITEM, a->line);
                g->a = n;
                g->b = node(p, JN_CONST, a->line);
                g->b->value = jj_int(a->i);
                advance(p);
                n = g;
            } else {
                fail_unexpected(p, "name or number");
            }
        } else if (is_op(t, "[")) {
            advance(p);
            struct jj_node *g = node(p, JN_GETITEM, t->line);
            g->a = n;
            struct jj_node *tuple = node(p, JN_TUPLE, t->line);
            while (!is_op(cur(p), "]")) {
                if (tuple->args.n)
                    expect_op(p, ",");
                if (is_op(cur(p), "]"))
                    break;
                push(p, &tuple->args, parse_subscribed(p));
            }
            advance(p);
            if (tuple->args.n == 0)
                fail(p, t->line, "expected a subscript");
            g->b = tuple->args.n == 1 ? tuple->args.items[0] : tuple;
            n = g;
        } else if (is_op(t, "(")) {
            struct jj_node *call = node(p, JN_CALL, t->line);
            call->a = n;
            n = parse_call_args(p, call);
        } else {
            return n;
        }
    }
}

static struct jj_node *parse_primary(struct parser *p)
{
    const struct jj_token *t = cur(p);
    struct jj_node *n;
    enter(p);
    if (t->kind == JT_NAME) {
        n = node(p, JN_CONST, t->line);
        if (is_name(t, "true") || is_name(t, "True"))
            n->value = jj_bool(true);
        else if (is_name(t, "false") || is_name(t, "False"))
            n->value = jj_bool(false);
        else if (is_name(t, "none") || is_name(t, "None"))
            n->value = jj_none();
        else {
            n->kind = JN_NAME;
            n->name = intern_tok(p, t);
            if (p->macro) {
                if (strcmp(n->name, "varargs") == 0)
                    p->macro->flags |= JJ_MACRO_USES_VARARGS;
                else if (strcmp(n->name, "kwargs") == 0)
                    p->macro->flags |= JJ_MACRO_USES_KWARGS;
                else if (strcmp(n->name, "caller") == 0)
                    p->macro->flags |= JJ_MACRO_USES_CALLER;
            }
        }
        advance(p);
    } else if (t->kind == JT_STRING) {
        n = node(p, JN_CONST, t->line);
        /* adjacent literals concatenate */
        size_t total = 0, k = 0;
        for (const struct jj_token *s = t; s->kind == JT_STRING; s = peek(p, ++k))
            total += s->n;
        char *buf = jj_arena_alloc(&p->t->arena, total + 1);
        if (!buf)
            fail_nomem(p);
        size_t off = 0;
        while (cur(p)->kind == JT_STRING) {
            memcpy(buf + off, cur(p)->p, cur(p)->n);
            off += cur(p)->n;
            advance(p);
        }
        n->value = jj_str(buf, total);
    } else if (t->kind == JT_INT || t->kind == JT_FLOAT) {
        n = node(p, JN_CONST, t->line);
        n->value = t->kind == JT_INT ? jj_int(t->i) : jj_float(t->f);
        advance(p);
    } else if (is_op(t, "(")) {
        advance(p);
        n = parse_tuple(p, true, NULL, true);
        expect_op(p, ")");
    } else if (is_op(t, "[")) {
        advance(p);
        n = node(p, JN_LIST, t->line);
        while (!is_op(cur(p), "]")) {
            if (n->args.n)
                expect_op(p, ",");
            if (is_op(cur(p), "]"))
                break;
            push(p, &n->args, parse_expression(p, true));
        }
        advance(p);
    } else if (is_op(t, "{")) {
        advance(p);
        n = node(p, JN_DICT, t->line);
        while (!is_op(cur(p), "}")) {
            if (n->args.n)
                expect_op(p, ",");
            if (is_op(cur(p), "}"))
                break;
            push(p, &n->args, parse_expression(p, true));
            expect_op(p, ":");
            push(p, &n->kwargs, parse_expression(p, true));
        }
        advance(p);
    } else {
        fail_unexpected(p, NULL);
    }
    leave(p);
    return n;
}

static struct jj_node *parse_unary(struct parser *p, bool with_filter)
{
    const struct jj_token *t = cur(p);
    struct jj_node *n;
    enter(p);
    if (is_op(t, "-") || is_op(t, "+")) {
        n = node(p, is_op(t, "-") ? JN_NEG : JN_POS, t->line);
        advance(p);
        n->a = parse_unary(p, false);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter)
        n = parse_filter_expr(p, n);
    leave(p);
    return n;
}

static struct jj_node *binary(struct parser *p, int op, struct jj_node *a, struct jj_node *b,
                              int line)
{
    struct jj_node *n = node(p, JN_BINARY, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct jj_node *parse_pow(struct parser *p)
{
    struct jj_node *left = parse_unary(p, true);
    while (is_op(cur(p), "**")) {
        int line = cur(p)->line;
        advance(p);
        left = binary(p, JJ_OP_POW, left, parse_unary(p, true), line);
    }
    return left;
}

static struct jj_node *parse_math2(struct parser *p)
{
    struct jj_node *left = parse_pow(p);
    for (;;) {
        const struct jj_token *t = cur(p);
        int op = is_op(t, "*") ? JJ_OP_MUL : is_op(t, "/") ? JJ_OP_DIV
               : is_op(t, "//") ? JJ_OP_FLOORDIV : is_op(t, "%") ? JJ_OP_MOD : 0;
        if (!op)
            return left;
        advance(p);
        left = binary(p, op, left, parse_pow(p), t->line);
    }
}

static struct jj_node *parse_concat(struct parser *p)
{
    struct jj_node *left = parse_math2(p);
    while (is_op(cur(p), "~")) {
        int line = cur(p)->line;
        advance(p);
        left = binary(p, JJ_OP_CONCAT, left, parse_math2(p), line);
    }
    return left;
}

static struct jj_node *parse_math1(struct parser *p)
{
    struct jj_node *left = parse_concat(p);
    for (;;) {
        const struct jj_token *t = cur(p);
        int op = is_op(t, "+") ? JJ_OP_ADD : is_op(t, "-") ? JJ_OP_SUB : 0;
        if (!op)
            return left;
        advance(p);
        left = binary(p, op, left, parse_concat(p), t->line);
    }
}

static struct jj_node *parse_compare(struct parser *p)
{
    int line = cur(p)->line;
    struct jj_node *first = parse_math1(p);
    struct jj_node *cmp = NULL;
    int ops[64];
    for (;;) {
        const struct jj_token *t = cur(p);
        int op = is_op(t, "==") ? JJ_OP_EQ : is_op(t, "!=") ? JJ_OP_NE
               : is_op(t, "<") ? JJ_OP_LT : is_op(t, "<=") ? JJ_OP_LE
               : is_op(t, ">") ? JJ_OP_GT : is_op(t, ">=") ? JJ_OP_GE : 0;
        if (op) {
            advance(p);
        } else if (is_name(t, "in")) {
            op = JJ_OP_IN;
            advance(p);
        } else if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
            op = JJ_OP_NOTIN;
            advance(p);
            advance(p);
        } else {
            break;
        }
        if (!cmp) {
            cmp = node(p, JN_COMPARE, line);
            cmp->a = first;
        }
        if (cmp->args.n == sizeof ops / sizeof *ops)
            fail(p, t->line, "too many chained comparisons");
        ops[cmp->args.n] = op;
        push(p, &cmp->args, parse_math1(p));
    }
    if (!cmp)
        return first;
    cmp->ops = jj_arena_alloc(&p->t->arena, cmp->args.n * sizeof *cmp->ops);
    if (!cmp->ops)
        fail_nomem(p);
    memcpy(cmp->ops, ops, cmp->args.n * sizeof *ops);
    return cmp;
}

static struct jj_node *parse_not(struct parser *p)
{
    if (is_name(cur(p), "not")) {
        struct jj_node *n = node(p, JN_NOT, cur(p)->line);
        advance(p);
        enter(p);
        n->a = parse_not(p);
        leave(p);
        return n;
    }
    return parse_compare(p);
}

static struct jj_node *parse_and(struct parser *p)
{
    struct jj_node *left = parse_not(p);
    while (is_name(cur(p), "and")) {
        struct jj_node *n = node(p, JN_AND, cur(p)->line);
        advance(p);
        n->a = left;
        n->b = parse_not(p);
        left = n;
    }
    return left;
}

static struct jj_node *parse_or(struct parser *p)
{
    struct jj_node *left = parse_and(p);
    while (is_name(cur(p), "or")) {
        struct jj_node *n = node(p, JN_OR, cur(p)->line);
        advance(p);
        n->a = left;
        n->b = parse_and(p);
        left = n;
    }
    return left;
}

static struct jj_node *parse_condexpr(struct parser *p)
{
    struct jj_node *e = parse_or(p);
    while (is_name(cur(p), "if")) {
        struct jj_node *n = node(p, JN_COND, cur(p)->line);
        advance(p);
        n->b = e;
        n->a = parse_or(p);
        if (skip_name(p, "else"))
            n->c = parse_condexpr(p);
        e = n;
    }
    return e;
}

static struct jj_node *parse_expression(struct parser *p, bool with_condexpr)
{
    enter(p);
    struct jj_node *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    leave(p);
    return n;
}

/* ---- statements --------------------------------------------------------------------------- */

static void parse_body(struct parser *p, struct jj_nodes *body, const char *const *end_tags);

/* Assignment targets: a name, a tuple of names or (with_ns) a namespace attribute. */
static void parse_targets(struct parser *p, struct jj_nodes *targets, bool with_ns,
                          const char *extra_end)
{
    bool parens = skip_op(p, "(");
    for (;;) {
        const struct jj_token *t = cur(p);
        if (t->kind != JT_NAME)
            fail_unexpected(p, "name");
        struct jj_node *n = node(p, JN_NAME, t->line);
        n->name = expect_name(p);
        if (with_ns && is_op(cur(p), ".")) {
            advance(p);
            struct jj_node *g = node(p, JN_GETATTR, t->line);
            g->a = n;
            g->name = expect_name(p);
            push(p, targets, g);
            return;
        }
        push(p, targets, n);
        if (!skip_op(p, ","))
            break;
        if (parens ? is_op(cur(p), ")") : (tuple_end(p, extra_end) || is_op(cur(p), "=")))
            break;
    }
    if (parens)
        expect_op(p, ")");
}

static void parse_params(struct parser *p, struct jj_node *n)
{
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (n->targets.n)
            expect_op(p, ",");
        struct jj_node *name = node(p, JN_NAME, cur(p)->line);
        name->name = expect_name(p);
        push(p, &n->targets, name);
        if (skip_op(p, "="))
            push(p, &n->args, parse_expression(p, true));
        else if (n->args.n && n->args.items[n->args.n - 1])
            fail(p, name->line, "non-default argument follows default argument");
        else
            push(p, &n->args, NULL);
    }
    advance(p);
}

static struct jj_node *parse_for(struct parser *p, int line)
{
    static const char *const body_end[] = {"endfor", "else", NULL};
    static const char *const else_end[] = {"endfor", NULL};
    struct jj_node *n = node(p, JN_FOR, line);
    parse_targets(p, &n->targets, false, "in");
    if (!skip_name(p, "in"))
        fail_unexpected(p, "'in'");
    n->a = parse_tuple(p, false, "recursive", false);
    if (skip_name(p, "if"))
        n->b = parse_expression(p, true);
    if (is_name(cur(p), "recursive"))
        fail(p, cur(p)->line, "recursive loops are not supported");
    expect_block_end(p);
    p->loop_depth++;
    parse_body(p, &n->body, body_end);
    p->loop_depth--;
    if (skip_name(p, "else")) {
        expect_block_end(p);
        parse_body(p, &n->orelse, else_end);
    }
    advance(p); /* endfor */
    return n;
}

static struct jj_node *parse_if(struct parser *p, int line)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const else_end[] = {"endif", NULL};
    struct jj_node *top = node(p, JN_IF, line);
    struct jj_node *n = top;
    for (;;) {
        n->a = parse_tuple(p, true, NULL, false);
        expect_block_end(p);
        parse_body(p, &n->body, ends);
        if (is_name(cur(p), "elif")) {
            struct jj_node *elif = node(p, JN_IF, cur(p)->line);
            advance(p);
            push(p, &n->orelse, elif);
            n = elif;
            continue;
        }
        if (skip_name(p, "else")) {
            expect_block_end(p);
            parse_body(p, &n->orelse, else_end);
        }
        advance(p); /* endif */
        return top;
    }
}

static struct jj_node *parse_set(struct parser *p, int line)
{
    static const char *const ends[] = {"endset", NULL};
    struct jj_node *n = node(p, JN_SET, line);
    parse_targets(p, &n->targets, true, NULL);
    if (skip_op(p, "=")) {
        n->a = parse_tuple(p, true, NULL, false);
        return n;
    }
    if (n->targets.n != 1)
        fail(p, line, "a block set takes one target");
    n->kind = JN_SET_BLOCK;
    if (is_op(cur(p), "|")) {
        struct jj_node *f = parse_filter(p, NULL, false);
        for (; f; f = f->a)
            push(p, &n->args, f);
        /* innermost filter first */
        for (size_t i = 0; i < n->args.n / 2; i++) {
            struct jj_node *tmp = n->args.items[i];
            n->args.items[i] = n->args.items[n->args.n - 1 - i];
            n->args.items[n->args.n - 1 - i] = tmp;
        }
    }
    expect_block_end(p);
    parse_body(p, &n->body, ends);
    advance(p);
    return n;
}

static struct jj_node *parse_macro(struct parser *p, int line)
{
    static const char *const ends[] = {"endmacro", NULL};
    struct jj_node *n = node(p, JN_MACRO, line);
    n->name = expect_name(p);
    parse_params(p, n);
    expect_block_end(p);
    struct jj_node *outer = p->macro;
    int outer_loops = p->loop_depth;
    p->macro = n;
    p->loop_depth = 0;
    parse_body(p, &n->body, ends);
    p->macro = outer;
    p->loop_depth = outer_loops;
    advance(p);
    if (cur(p)->kind == JT_NAME)
        advance(p); /* {% endmacro name %} */
    return n;
}

static struct jj_node *parse_call_block(struct parser *p, int line)
{
    static const char *const ends[] = {"endcall", NULL};
    struct jj_node *n = node(p, JN_CALL_BLOCK, line);
    if (is_op(cur(p), "("))
        parse_params(p, n);
    n->a = parse_expression(p, true);
    if (n->a->kind != JN_CALL)
        fail(p, line, "expected call");
    expect_block_end(p);
    struct jj_node *outer = p->macro;
    int outer_loops = p->loop_depth;
    p->macro = n;
    p->loop_depth = 0;
    parse_body(p, &n->body, ends);
    p->macro = outer;
    p->loop_depth = outer_loops;
    advance(p);
    return n;
}

static struct jj_node *parse_filter_block(struct parser *p, int line)
{
    static const char *const ends[] = {"endfilter", NULL};
    struct jj_node *n = node(p, JN_FILTER_BLOCK, line);
    struct jj_node *f = parse_filter(p, NULL, true);
    for (; f; f = f->a)
        push(p, &n->args, f);
    for (size_t i = 0; i < n->args.n / 2; i++) {
        struct jj_node *tmp = n->args.items[i];
        n->args.items[i] = n->args.items[n->args.n - 1 - i];
        n->args.items[n->args.n - 1 - i] = tmp;
    }
    expect_block_end(p);
    parse_body(p, &n->body, ends);
    advance(p);
    return n;
}

static struct jj_node *parse_with(struct parser *p, int line)
{
    static const char *const ends[] = {"endwith", NULL};
    struct jj_node *n = node(p, JN_WITH, line);
    while (cur(p)->kind != JT_BLOCK_END) {
        if (n->targets.n)
            expect_op(p, ",");
        struct jj_node *t = node(p, JN_NAME, cur(p)->line);
        t->name = expect_name(p);
        push(p, &n->targets, t);
        expect_op(p, "=");
        push(p, &n->args, parse_expression(p, true));
    }
    expect_block_end(p);
    parse_body(p, &n->body, ends);
    advance(p);
    return n;
}

static struct jj_node *parse_scope(struct parser *p, int line, const char *end_tag,
                                   bool named)
{
    const char *ends[] = {end_tag, NULL};
    struct jj_node *n = node(p, JN_SCOPE, line);
    if (named) {
        expect_name(p);
        while (cur(p)->kind == JT_NAME) /* scoped, required */
            advance(p);
    }
    expect_block_end(p);
    parse_body(p, &n->body, ends);
    advance(p);
    if (named && cur(p)->kind == JT_NAME)
        advance(p);
    return n;
}

static struct jj_node *parse_statement(struct parser *p)
{
    const struct jj_token *t = cur(p);
    int line = t->line;
    if (t->kind != JT_NAME)
        fail_unexpected(p, "tag name");
    struct jj_node *n;
    enter(p);
    advance(p);
    if (is_name(t, "for"))
        n = parse_for(p, line);
    else if (is_name(t, "if"))
        n = parse_if(p, line);
    else if (is_name(t, "set"))
        n = parse_set(p, line);
    else if (is_name(t, "macro"))
        n = parse_macro(p, line);
    else if (is_name(t, "call"))
        n = parse_call_block(p, line);
    else if (is_name(t, "filter"))
        n = parse_filter_block(p, line);
    else if (is_name(t, "with"))
        n = parse_with(p, line);
    else if (is_name(t, "block"))
        n = parse_scope(p, line, "endblock", true);
    else if (is_name(t, "generation"))
        n = parse_scope(p, line, "endgeneration", false);
    else if (is_name(t, "break") || is_name(t, "continue")) {
        if (p->loop_depth == 0)
            fail(p, line, "'%.*s' outside of a loop", (int)t->n, t->p);
        n = node(p, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, line);
    } else if (is_name(t, "include") || is_name(t, "import") || is_name(t, "from") ||
               is_name(t, "extends")) {
        fail(p, line, "'%.*s' is not available in the chat template sandbox", (int)t->n, t->p);
    } else {
        fail(p, line, "unknown tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p);
    }
    expect_block_end(p);
    leave(p);
    return n;
}

/* Parses statements until a block tag named in end_tags (left as the current token). */
static void parse_body(struct parser *p, struct jj_nodes *body, const char *const *end_tags)
{
    for (;;) {
        const struct jj_token *t = cur(p);
        switch (t->kind) {
        case JT_DATA: {
            struct jj_node *n = node(p, JN_TEXT, t->line);
            n->value = jj_str(t->p, t->n);
            push(p, body, n);
            advance(p);
            break;
        }
        case JT_VAR_BEGIN: {
            advance(p);
            struct jj_node *n = node(p, JN_OUTPUT, t->line);
            n->a = parse_tuple(p, true, NULL, false);
            if (cur(p)->kind != JT_VAR_END)
                fail_unexpected(p, "end of print statement");
            advance(p);
            push(p, body, n);
            break;
        }
        case JT_BLOCK_BEGIN: {
            advance(p);
            const struct jj_token *name = cur(p);
            for (size_t i = 0; end_tags && end_tags[i]; i++)
                if (is_name(name, end_tags[i]))
                    return;
            if (name->kind == JT_NAME && name->n > 3 && memcmp(name->p, "end", 3) == 0)
                fail(p, name->line, "unexpected '%.*s'", (int)name->n, name->p);
            if (is_name(name, "elif") || is_name(name, "else"))
                fail(p, name->line, "unexpected '%.*s'", (int)name->n, name->p);
            push(p, body, parse_statement(p));
            break;
        }
        case JT_EOF:
            if (end_tags)
                fail(p, t->line, "unexpected end of template, expected '%s'", end_tags[0]);
            return;
        default:
            fail_unexpected(p, NULL);
        }
    }
}

enum splash_status jj_parse(struct splash_jinja_template *t, const struct jj_tokens *toks,
                            struct splash_err *err)
{
    struct parser p = {.t = t, .toks = toks, .err = err};
    if (setjmp(p.fail))
        return err && strstr(err->msg, "out of memory") ? SPLASH_ERR_NOMEM : SPLASH_ERR_INVALID;
    parse_body(&p, &t->body, NULL);
    return SPLASH_OK;
}
