/* The interpreter: walks a parsed template's AST with Jinja2's scoping and Python's operators. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/chat/jinja_internal.h"

enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

static struct jj_value eval(struct jj_ctx *c, struct jj_scope *s, const struct jj_node *n);
static enum flow exec_body(struct jj_ctx *c, struct jj_scope *s, const struct jj_nodes *body);

/* ---- scopes ----------------------------------------------------------------------------------*/

static struct jj_scope *scope_new(struct jj_ctx *c, struct jj_scope *parent)
{
    struct jj_scope *s = jj_alloc(c, sizeof *s);
    s->parent = parent;
    return s;
}

/* Names are interned, so a pointer compare finds them. */
static struct jj_value *scope_find(struct jj_scope *s, const char *name)
{
    for (; s; s = s->parent)
        for (size_t i = s->n; i-- > 0;)
            if (s->names[i] == name)
                return &s->vals[i];
    return NULL;
}

static void scope_set(struct jj_ctx *c, struct jj_scope *s, const char *name, struct jj_value v)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->names[i] == name) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        const char **names = jj_alloc(c, cap * sizeof *names);
        struct jj_value *vals = jj_alloc(c, cap * sizeof *vals);
        if (s->n) {
            memcpy(names, s->names, s->n * sizeof *names);
            memcpy(vals, s->vals, s->n * sizeof *vals);
        }
        s->names = names;
        s->vals = vals;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n] = v;
    s->n++;
}

static struct jj_value lookup(struct jj_ctx *c, struct jj_scope *s, const char *name)
{
    struct jj_value *v = scope_find(s, name);
    if (v)
        return *v;
    struct jj_value g;
    if (jj_global_lookup(c, name, &g))
        return g;
    return jj_undefined_name(c, name);
}

/* ---- arithmetic ------------------------------------------------------------------------------*/

static const char *op_symbol(int op)
{
    switch (op) {
    case JJ_OP_ADD: return "+";
    case JJ_OP_SUB: return "-";
    case JJ_OP_MUL: return "*";
    case JJ_OP_DIV: return "/";
    case JJ_OP_FLOORDIV: return "//";
    case JJ_OP_MOD: return "%";
    case JJ_OP_POW: return "** or pow()";
    default: return "?";
    }
}

_Noreturn static void fail_operands(struct jj_ctx *c, int op, struct jj_value a,
                                    struct jj_value b)
{
    jj_fail(c, JJ_FAIL_RUNTIME, "unsupported operand type(s) for %s: '%s' and '%s'",
            op_symbol(op), jj_type_name(a), jj_type_name(b));
}

static int64_t ival(struct jj_value v) { return v.kind == JJ_BOOL ? v.u.b : v.u.i; }

static struct jj_value repeat(struct jj_ctx *c, struct jj_value seq, int64_t times)
{
    if (times < 0)
        times = 0;
    if (seq.kind == JJ_STR) {
        if (seq.u.s.n && (uint64_t)times > c->limits.max_output / seq.u.s.n)
            jj_fail(c, JJ_FAIL_LIMIT, "string repetition exceeds %zu bytes",
                    c->limits.max_output);
        size_t n = seq.u.s.n * (size_t)times;
        char *p = jj_alloc(c, n + 1);
        for (int64_t i = 0; i < times; i++)
            memcpy(p + (size_t)i * seq.u.s.n, seq.u.s.p, seq.u.s.n);
        return jj_str(p, n);
    }
    const struct jj_list *l = seq.u.list;
    if (l->n && (uint64_t)times > c->limits.max_steps / l->n)
        jj_fail(c, JJ_FAIL_LIMIT, "list repetition too large");
    struct jj_list *r = jj_list_new(c, l->n * (size_t)times);
    r->is_tuple = l->is_tuple;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < l->n; k++)
            r->items[r->n++] = l->items[k];
    return jj_list_value(r);
}

struct jj_value jj_percent_format(struct jj_ctx *c, struct jj_str fmt, struct jj_value args)
{
    struct jj_buf b = {0};
    size_t argi = 0;
    const struct jj_list *tuple = args.kind == JJ_LIST && args.u.list->is_tuple ? args.u.list
                                                                                 : NULL;
    for (size_t i = 0; i < fmt.n; i++) {
        if (fmt.p[i] != '%') {
            jj_buf_putc(c, &b, fmt.p[i]);
            continue;
        }
        if (++i >= fmt.n)
            jj_fail(c, JJ_FAIL_RUNTIME, "incomplete format");
        char conv = fmt.p[i];
        if (conv == '%') {
            jj_buf_putc(c, &b, '%');
            continue;
        }
        struct jj_value arg;
        if (tuple) {
            if (argi >= tuple->n)
                jj_fail(c, JJ_FAIL_RUNTIME, "not enough arguments for format string");
            arg = tuple->items[argi++];
        } else {
            if (argi++)
                jj_fail(c, JJ_FAIL_RUNTIME, "not enough arguments for format string");
            arg = args;
        }
        char tmp[64];
        switch (conv) {
        case 's': jj_str_into(c, &b, arg); break;
        case 'r': jj_repr_into(c, &b, arg); break;
        case 'd':
        case 'i':
            if (!jj_is_number(arg))
                jj_fail(c, JJ_FAIL_RUNTIME, "%%%c format: a real number is required, not "
                        "%s", conv, jj_type_name(arg));
            snprintf(tmp, sizeof tmp, "%" PRId64,
                     arg.kind == JJ_FLOAT ? (int64_t)arg.u.f : ival(arg));
            jj_buf_put(c, &b, tmp, strlen(tmp));
            break;
        case 'f':
            if (!jj_is_number(arg))
                jj_fail(c, JJ_FAIL_RUNTIME, "must be real number, not %s",
                        jj_type_name(arg));
            snprintf(tmp, sizeof tmp, "%f", jj_as_double(arg));
            jj_buf_put(c, &b, tmp, strlen(tmp));
            break;
        default:
            jj_fail(c, JJ_FAIL_RUNTIME, "unsupported format character '%c'", conv);
        }
    }
    if (tuple ? argi < tuple->n : argi == 0)
        jj_fail(c, JJ_FAIL_RUNTIME,
                "not all arguments converted during string formatting");
    return jj_buf_to_str(c, &b);
}

static struct jj_value binary(struct jj_ctx *c, int op, struct jj_value a, struct jj_value b)
{
    if (op == JJ_OP_CONCAT) {
        struct jj_buf buf = {0};
        jj_str_into(c, &buf, a);
        jj_str_into(c, &buf, b);
        return jj_buf_to_str(c, &buf);
    }
    if (a.kind == JJ_UNDEFINED)
        jj_fail_undefined(c, a);
    if (b.kind == JJ_UNDEFINED)
        jj_fail_undefined(c, b);
    bool nums = jj_is_number(a) && jj_is_number(b);
    bool ints = nums && a.kind != JJ_FLOAT && b.kind != JJ_FLOAT;
    switch (op) {
    case JJ_OP_ADD:
        if (ints) {
            int64_t r;
            if (__builtin_add_overflow(ival(a), ival(b), &r))
                jj_fail(c, JJ_FAIL_RUNTIME, "integer overflow");
            return jj_int(r);
        }
        if (nums)
            return jj_float(jj_as_double(a) + jj_as_double(b));
        if (a.kind == JJ_STR && b.kind == JJ_STR) {
            char *p = jj_alloc(c, a.u.s.n + b.u.s.n + 1);
            memcpy(p, a.u.s.p, a.u.s.n);
            memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
            return jj_str(p, a.u.s.n + b.u.s.n);
        }
        if (a.kind == JJ_LIST && b.kind == JJ_LIST && a.u.list->is_tuple == b.u.list->is_tuple) {
            struct jj_list *l = jj_list_new(c, a.u.list->n + b.u.list->n);
            l->is_tuple = a.u.list->is_tuple;
            for (size_t i = 0; i < a.u.list->n; i++)
                l->items[l->n++] = a.u.list->items[i];
            for (size_t i = 0; i < b.u.list->n; i++)
                l->items[l->n++] = b.u.list->items[i];
            return jj_list_value(l);
        }
        if (a.kind == JJ_STR || a.kind == JJ_LIST)
            jj_fail(c, JJ_FAIL_RUNTIME, "can only concatenate %s (not \"%s\") to %s",
                    jj_type_name(a), jj_type_name(b), jj_type_name(a));
        fail_operands(c, op, a, b);
    case JJ_OP_SUB:
        if (ints) {
            int64_t r;
            if (__builtin_sub_overflow(ival(a), ival(b), &r))
                jj_fail(c, JJ_FAIL_RUNTIME, "integer overflow");
            return jj_int(r);
        }
        if (nums)
            return jj_float(jj_as_double(a) - jj_as_double(b));
        fail_operands(c, op, a, b);
    case JJ_OP_MUL:
        if (ints) {
            int64_t r;
            if (__builtin_mul_overflow(ival(a), ival(b), &r))
                jj_fail(c, JJ_FAIL_RUNTIME, "integer overflow");
            return jj_int(r);
        }
        if (nums)
            return jj_float(jj_as_double(a) * jj_as_double(b));
        if ((a.kind == JJ_STR || a.kind == JJ_LIST) && (b.kind == JJ_INT || b.kind == JJ_BOOL))
            return repeat(c, a, ival(b));
        if ((b.kind == JJ_STR || b.kind == JJ_LIST) && (a.kind == JJ_INT || a.kind == JJ_BOOL))
            return repeat(c, b, ival(a));
        fail_operands(c, op, a, b);
    case JJ_OP_DIV:
        if (!nums)
            fail_operands(c, op, a, b);
        if (jj_as_double(b) == 0.0)
            jj_fail(c, JJ_FAIL_RUNTIME, "division by zero");
        if (ints && (ival(a) > (1LL << 53) || ival(a) < -(1LL << 53) || ival(b) > (1LL << 53) ||
                     ival(b) < -(1LL << 53)))
            /* Python rounds int / int once; int64s are exact in long double */
            return jj_float((double)((long double)ival(a) / (long double)ival(b)));
        return jj_float(jj_as_double(a) / jj_as_double(b));
    case JJ_OP_FLOORDIV:
    case JJ_OP_MOD:
        if (op == JJ_OP_MOD && a.kind == JJ_STR)
            return jj_percent_format(c, a.u.s, b);
        if (!nums)
            fail_operands(c, op, a, b);
        if (ints) {
            int64_t x = ival(a), y = ival(b);
            if (y == 0)
                jj_fail(c, JJ_FAIL_RUNTIME, op == JJ_OP_MOD ? "integer modulo by zero"
                                                                  : "integer division or "
                                                                    "modulo by zero");
            if (x == INT64_MIN && y == -1)
                return op == JJ_OP_MOD ? jj_int(0) : jj_float(9.223372036854775808e18);
            int64_t q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) {
                q--;
                r += y;
            }
            return jj_int(op == JJ_OP_MOD ? r : q);
        } else {
            double x = jj_as_double(a), y = jj_as_double(b);
            if (y == 0.0)
                jj_fail(c, JJ_FAIL_RUNTIME, "float modulo");
            /* CPython's float divmod, signed zeros included */
            double mod = fmod(x, y), div = (x - mod) / y, q;
            if (mod != 0) {
                if ((y < 0) != (mod < 0)) {
                    mod += y;
                    div -= 1.0;
                }
            } else {
                mod = copysign(0.0, y);
            }
            if (div != 0) {
                q = floor(div);
                if (div - q > 0.5)
                    q += 1.0;
            } else {
                q = copysign(0.0, x / y);
            }
            return jj_float(op == JJ_OP_MOD ? mod : q);
        }
    case JJ_OP_POW:
        if (!nums)
            fail_operands(c, op, a, b);
        if (ints && ival(b) >= 0) {
            int64_t base = ival(a), e = ival(b), r = 1;
            while (e-- > 0)
                if (__builtin_mul_overflow(r, base, &r))
                    jj_fail(c, JJ_FAIL_RUNTIME, "integer overflow");
                else if (r == 0 || r == 1)
                    break;
            return jj_int(r);
        }
        return jj_float(pow(jj_as_double(a), jj_as_double(b)));
    }
    jj_fail(c, JJ_FAIL_RUNTIME, "unknown operator");
}

static bool contains(struct jj_ctx *c, struct jj_value needle, struct jj_value hay)
{
    switch (hay.kind) {
    case JJ_UNDEFINED: return false;
    case JJ_STR:
        if (needle.kind != JJ_STR)
            jj_fail(c, JJ_FAIL_RUNTIME, "'in <string>' requires string as left operand, "
                    "not %s", jj_type_name(needle));
        if (needle.u.s.n == 0)
            return true;
        return memmem(hay.u.s.p, hay.u.s.n, needle.u.s.p, needle.u.s.n) != NULL;
    case JJ_LIST:
        for (size_t i = 0; i < hay.u.list->n; i++)
            if (jj_equal(hay.u.list->items[i], needle))
                return true;
        return false;
    case JJ_DICT: return jj_dict_get(hay.u.dict, needle) != NULL;
    default:
        jj_fail(c, JJ_FAIL_RUNTIME, "argument of type '%s' is not iterable",
                jj_type_name(hay));
    }
}

static bool compare(struct jj_ctx *c, int op, struct jj_value a, struct jj_value b)
{
    switch (op) {
    case JJ_OP_EQ: return jj_equal(a, b);
    case JJ_OP_NE: return !jj_equal(a, b);
    case JJ_OP_LT: return jj_compare(c, a, b) < 0;
    case JJ_OP_LE: return jj_compare(c, a, b) <= 0;
    case JJ_OP_GT: return jj_compare(c, a, b) > 0;
    case JJ_OP_GE: return jj_compare(c, a, b) >= 0;
    case JJ_OP_IN: return contains(c, a, b);
    case JJ_OP_NOTIN: return !contains(c, a, b);
    }
    return false;
}

/* ---- subscripts ------------------------------------------------------------------------------ */

static int64_t slice_index(struct jj_ctx *c, struct jj_value v, const char *what)
{
    if (v.kind == JJ_INT || v.kind == JJ_BOOL)
        return ival(v);
    jj_fail(c, JJ_FAIL_RUNTIME, "slice %s must be an integer or None, not %s", what,
            jj_type_name(v));
}

static struct jj_value slice(struct jj_ctx *c, struct jj_scope *s, struct jj_value obj,
                             const struct jj_node *sl)
{
    if (obj.kind == JJ_UNDEFINED)
        jj_fail_undefined(c, obj);
    struct jj_list *items = NULL;
    int64_t len;
    if (obj.kind == JJ_STR) {
        items = jj_iterate(c, obj);
        len = (int64_t)items->n;
    } else if (obj.kind == JJ_LIST) {
        items = obj.u.list;
        len = (int64_t)items->n;
    } else {
        jj_fail(c, JJ_FAIL_RUNTIME, "'%s' object is not subscriptable", jj_type_name(obj));
    }
    int64_t step = 1;
    struct jj_value v;
    if (sl->d && (v = eval(c, s, sl->d)).kind != JJ_NONE)
        step = slice_index(c, v, "step");
    if (step == 0)
        jj_fail(c, JJ_FAIL_RUNTIME, "slice step cannot be zero");
    int64_t lo = step > 0 ? 0 : len - 1, hi = step > 0 ? len : -1;
    if (sl->b && (v = eval(c, s, sl->b)).kind != JJ_NONE) {
        lo = slice_index(c, v, "indices");
        if (lo < 0)
            lo += len;
        if (lo < 0)
            lo = step > 0 ? 0 : -1;
        if (lo >= len)
            lo = step > 0 ? len : len - 1;
    }
    if (sl->c && (v = eval(c, s, sl->c)).kind != JJ_NONE) {
        hi = slice_index(c, v, "indices");
        if (hi < 0)
            hi += len;
        if (hi < 0)
            hi = step > 0 ? 0 : -1;
        if (hi >= len)
            hi = step > 0 ? len : len - 1;
    }
    struct jj_list *r = jj_list_new(c, 0);
    r->is_tuple = obj.kind == JJ_LIST && obj.u.list->is_tuple;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
        jj_list_push(c, r, items->items[i]);
    if (obj.kind != JJ_STR)
        return jj_list_value(r);
    struct jj_buf b = {0};
    for (size_t i = 0; i < r->n; i++)
        jj_buf_put(c, &b, r->items[i].u.s.p, r->items[i].u.s.n);
    return jj_buf_to_str(c, &b);
}

/* ---- calls ------------------------------------------------------------------------------------*/

static void eval_args(struct jj_ctx *c, struct jj_scope *s, const struct jj_node *n,
                      struct jj_args *a)
{
    a->n_pos = n->args.n;
    a->pos = a->n_pos ? jj_alloc(c, a->n_pos * sizeof *a->pos) : NULL;
    for (size_t i = 0; i < a->n_pos; i++)
        a->pos[i] = eval(c, s, n->args.items[i]);
    a->n_kw = n->kwargs.n;
    a->kw = a->n_kw ? jj_alloc(c, a->n_kw * sizeof *a->kw) : NULL;
    a->kw_names = a->n_kw ? jj_alloc(c, a->n_kw * sizeof *a->kw_names) : NULL;
    for (size_t i = 0; i < a->n_kw; i++) {
        a->kw_names[i] = n->kwnames.items[i]->name;
        a->kw[i] = eval(c, s, n->kwargs.items[i]);
    }
}

static struct jj_value render_to_string(struct jj_ctx *c, struct jj_scope *s,
                                        const struct jj_nodes *body)
{
    struct jj_buf buf = {0}, *saved = c->out;
    c->out = &buf;
    exec_body(c, s, body);
    c->out = saved;
    return jj_buf_to_str(c, &buf);
}

static struct jj_value call_macro(struct jj_ctx *c, struct jj_func *fn, struct jj_args *a)
{
    const struct jj_node *m = fn->node;
    const char *mname = m->kind == JN_MACRO ? m->name : "caller";
    if (++c->depth > c->limits.max_depth)
        jj_fail(c, JJ_FAIL_LIMIT, "macro calls nested more than %u deep",
                c->limits.max_depth);
    jj_step(c);
    struct jj_scope *s = scope_new(c, fn->closure);
    size_t n_params = m->targets.n;
    bool *bound = n_params ? jj_alloc(c, n_params * sizeof *bound) : NULL;
    for (size_t i = 0; i < a->n_pos && i < n_params; i++) {
        scope_set(c, s, m->targets.items[i]->name, a->pos[i]);
        bound[i] = true;
    }
    struct jj_list *varargs = jj_list_new(c, 0);
    varargs->is_tuple = true;
    if (a->n_pos > n_params) {
        if (!(m->flags & JJ_MACRO_USES_VARARGS))
            jj_fail(c, JJ_FAIL_RUNTIME, "macro '%s' takes not more than %zu argument(s)",
                    mname, n_params);
        for (size_t i = n_params; i < a->n_pos; i++)
            jj_list_push(c, varargs, a->pos[i]);
    }
    struct jj_dict *kwargs = jj_dict_new(c, 0);
    struct jj_value caller = jj_undefined_plain();
    bool has_caller = false;
    for (size_t k = 0; k < a->n_kw; k++) {
        size_t i = 0;
        while (i < n_params && m->targets.items[i]->name != a->kw_names[k])
            i++;
        if (i < n_params) {
            if (bound[i])
                jj_fail(c, JJ_FAIL_RUNTIME, "macro '%s' got multiple values for argument "
                        "'%s'", mname, a->kw_names[k]);
            scope_set(c, s, m->targets.items[i]->name, a->kw[k]);
            bound[i] = true;
        } else if (strcmp(a->kw_names[k], "caller") == 0) {
            caller = a->kw[k];
            has_caller = true;
        } else if (m->flags & JJ_MACRO_USES_KWARGS) {
            jj_dict_set(c, kwargs, jj_str(a->kw_names[k], strlen(a->kw_names[k])), a->kw[k]);
        } else {
            jj_fail(c, JJ_FAIL_RUNTIME, "macro '%s' takes no keyword argument '%s'", mname,
                    a->kw_names[k]);
        }
    }
    for (size_t i = 0; i < n_params; i++) {
        if (bound[i])
            continue;
        const struct jj_node *def = m->args.items[i];
        struct jj_value v;
        if (def) {
            v = eval(c, s, def);
        } else {
            char hint[160];
            snprintf(hint, sizeof hint, "parameter '%s' was not provided",
                     m->targets.items[i]->name);
            v = jj_undefined_hint(c, jj_arena_strndup(&c->arena, hint, strlen(hint)));
        }
        scope_set(c, s, m->targets.items[i]->name, v);
    }
    const struct splash_jinja_template *t = c->tpl;
    const char *n_varargs = jj_intern_find(t, "varargs", 7);
    const char *n_kwargs = jj_intern_find(t, "kwargs", 6);
    const char *n_caller = jj_intern_find(t, "caller", 6);
    if (n_varargs)
        scope_set(c, s, n_varargs, jj_list_value(varargs));
    if (n_kwargs)
        scope_set(c, s, n_kwargs, jj_dict_value(kwargs));
    if (n_caller && has_caller)
        scope_set(c, s, n_caller, caller);
    struct jj_value r = render_to_string(c, s, &m->body);
    c->depth--;
    return r;
}

struct jj_value jj_call_value(struct jj_ctx *c, struct jj_value callee, struct jj_args *a)
{
    if (callee.kind == JJ_UNDEFINED)
        jj_fail_undefined(c, callee);
    if (callee.kind != JJ_FUNC)
        jj_fail(c, JJ_FAIL_RUNTIME, "'%s' object is not callable", jj_type_name(callee));
    struct jj_func *fn = callee.u.fn;
    switch (fn->kind) {
    case JJ_FN_MACRO:
    case JJ_FN_CALLER: return call_macro(c, fn, a);
    case JJ_FN_GLOBAL: return jj_call_global(c, fn, a);
    case JJ_FN_METHOD: return jj_call_method(c, fn, a);
    case JJ_FN_LOOP_CYCLE: {
        if (a->n_pos == 0)
            jj_fail(c, JJ_FAIL_RUNTIME, "no items for cycling given");
        const struct jj_loop *l = fn->self.u.loop;
        return a->pos[(size_t)l->index0 % a->n_pos];
    }
    case JJ_FN_LOOP_CHANGED: {
        struct jj_loop *l = fn->self.u.loop;
        struct jj_list *vals = jj_list_new(c, a->n_pos);
        for (size_t i = 0; i < a->n_pos; i++)
            vals->items[vals->n++] = a->pos[i];
        struct jj_value v = jj_list_value(vals);
        if (l->has_changed && jj_equal(l->last_changed, v))
            return jj_bool(false);
        l->has_changed = true;
        l->last_changed = v;
        return jj_bool(true);
    }
    }
    return jj_none();
}

/* ---- expressions -----------------------------------------------------------------------------*/

static struct jj_value eval_filter(struct jj_ctx *c, struct jj_scope *s, const struct jj_node *n,
                                   struct jj_value operand)
{
    struct jj_args a;
    eval_args(c, s, n, &a);
    return jj_call_filter(c, n->name, operand, &a, n->line);
}

static struct jj_value eval(struct jj_ctx *c, struct jj_scope *s, const struct jj_node *n)
{
    switch (n->kind) {
    case JN_CONST: return n->value;
    case JN_NAME: return lookup(c, s, n->name);
    case JN_GETATTR: {
        struct jj_value obj = eval(c, s, n->a);
        return jj_getattr(c, obj, n->name, strlen(n->name));
    }
    case JN_GETITEM: {
        struct jj_value obj = eval(c, s, n->a);
        if (n->b->kind == JN_SLICE)
            return slice(c, s, obj, n->b);
        return jj_getitem(c, obj, eval(c, s, n->b));
    }
    case JN_CALL: {
        struct jj_value callee = eval(c, s, n->a);
        struct jj_args a;
        eval_args(c, s, n, &a);
        return jj_call_value(c, callee, &a);
    }
    case JN_FILTER: return eval_filter(c, s, n, eval(c, s, n->a));
    case JN_TEST: {
        struct jj_value v = eval(c, s, n->a);
        struct jj_args a;
        eval_args(c, s, n, &a);
        bool r = jj_call_test(c, n->name, v, &a, n->line);
        return jj_bool((n->flags & JJ_TEST_NEGATED) ? !r : r);
    }
    case JN_NEG:
    case JN_POS: {
        struct jj_value v = eval(c, s, n->a);
        if (v.kind == JJ_UNDEFINED)
            jj_fail_undefined(c, v);
        if (!jj_is_number(v))
            jj_fail(c, JJ_FAIL_RUNTIME, "bad operand type for unary %c: '%s'",
                    n->kind == JN_NEG ? '-' : '+', jj_type_name(v));
        if (n->kind == JN_POS)
            return v.kind == JJ_BOOL ? jj_int(v.u.b) : v;
        if (v.kind == JJ_FLOAT)
            return jj_float(-v.u.f);
        if (ival(v) == INT64_MIN)
            jj_fail(c, JJ_FAIL_RUNTIME, "integer overflow");
        return jj_int(-ival(v));
    }
    case JN_NOT: return jj_bool(!jj_truthy(eval(c, s, n->a)));
    case JN_AND: {
        struct jj_value a = eval(c, s, n->a);
        return jj_truthy(a) ? eval(c, s, n->b) : a;
    }
    case JN_OR: {
        struct jj_value a = eval(c, s, n->a);
        return jj_truthy(a) ? a : eval(c, s, n->b);
    }
    case JN_BINARY: {
        struct jj_value a = eval(c, s, n->a);
        return binary(c, n->op, a, eval(c, s, n->b));
    }
    case JN_COMPARE: {
        struct jj_value left = eval(c, s, n->a);
        for (size_t i = 0; i < n->args.n; i++) {
            struct jj_value right = eval(c, s, n->args.items[i]);
            if (!compare(c, n->ops[i], left, right))
                return jj_bool(false);
            left = right;
        }
        return jj_bool(true);
    }
    case JN_COND:
        if (jj_truthy(eval(c, s, n->a)))
            return eval(c, s, n->b);
        if (n->c)
            return eval(c, s, n->c);
        return jj_undefined_hint(c, "the inline if-expression evaluated to false and no else "
                                    "section was defined.");
    case JN_LIST:
    case JN_TUPLE: {
        struct jj_list *l = jj_list_new(c, n->args.n);
        l->is_tuple = n->kind == JN_TUPLE;
        for (size_t i = 0; i < n->args.n; i++)
            l->items[l->n++] = eval(c, s, n->args.items[i]);
        return jj_list_value(l);
    }
    case JN_DICT: {
        struct jj_dict *d = jj_dict_new(c, n->args.n);
        for (size_t i = 0; i < n->args.n; i++) {
            struct jj_value k = eval(c, s, n->args.items[i]);
            if (k.kind == JJ_LIST && !k.u.list->is_tuple)
                jj_fail(c, JJ_FAIL_RUNTIME, "unhashable type: 'list'");
            if (k.kind == JJ_DICT)
                jj_fail(c, JJ_FAIL_RUNTIME, "unhashable type: 'dict'");
            jj_dict_set(c, d, k, eval(c, s, n->kwargs.items[i]));
        }
        return jj_dict_value(d);
    }
    default:
        jj_fail(c, JJ_FAIL_RUNTIME, "line %d: not an expression", n->line);
    }
}

/* ---- statements ------------------------------------------------------------------------------*/

static void assign(struct jj_ctx *c, struct jj_scope *s, const struct jj_nodes *targets,
                   struct jj_value v)
{
    if (targets->n == 1) {
        const struct jj_node *t = targets->items[0];
        if (t->kind == JN_NAME) {
            scope_set(c, s, t->name, v);
            return;
        }
        /* ns.attr = v */
        struct jj_value obj = lookup(c, s, t->a->name);
        if (obj.kind != JJ_NS)
            jj_fail(c, JJ_FAIL_RUNTIME, "cannot assign attribute on non-namespace object");
        jj_dict_set(c, obj.u.dict, jj_str(t->name, strlen(t->name)), v);
        return;
    }
    struct jj_list *items = jj_iterate(c, v);
    if (items->n != targets->n)
        jj_fail(c, JJ_FAIL_RUNTIME, items->n > targets->n
                    ? "too many values to unpack (expected %zu)"
                    : "not enough values to unpack (expected %zu)", targets->n);
    for (size_t i = 0; i < targets->n; i++)
        scope_set(c, s, targets->items[i]->name, items->items[i]);
}

static struct jj_value apply_filters(struct jj_ctx *c, struct jj_scope *s,
                                     const struct jj_nodes *filters, struct jj_value v)
{
    for (size_t i = 0; i < filters->n; i++)
        v = eval_filter(c, s, filters->items[i], v);
    return v;
}

static enum flow exec_for(struct jj_ctx *c, struct jj_scope *s, const struct jj_node *n)
{
    struct jj_value iterable = eval(c, s, n->a);
    if (iterable.kind == JJ_NONE || jj_is_number(iterable) || iterable.kind == JJ_FUNC)
        jj_fail(c, JJ_FAIL_RUNTIME, "'%s' object is not iterable",
                jj_type_name(iterable));
    struct jj_list *items = jj_iterate(c, iterable);
    const char *loop_name = jj_intern_find(c->tpl, "loop", 4);
    if (n->b) {
        struct jj_list *kept = jj_list_new(c, 0);
        for (size_t i = 0; i < items->n; i++) {
            jj_step(c);
            struct jj_scope *fs = scope_new(c, s);
            assign(c, fs, &n->targets, items->items[i]);
            if (jj_truthy(eval(c, fs, n->b)))
                jj_list_push(c, kept, items->items[i]);
        }
        items = kept;
    }
    if (items->n == 0)
        return exec_body(c, s, &n->orelse) == FLOW_NORMAL ? FLOW_NORMAL : FLOW_NORMAL;
    struct jj_loop *loop = jj_alloc(c, sizeof *loop);
    loop->items = items;
    for (size_t i = 0; i < items->n; i++) {
        jj_step(c);
        struct jj_scope *it = scope_new(c, s);
        assign(c, it, &n->targets, items->items[i]);
        loop->index0 = (int64_t)i;
        if (loop_name)
            scope_set(c, it, loop_name, (struct jj_value){.kind = JJ_LOOP, .u.loop = loop});
        if (exec_body(c, it, &n->body) == FLOW_BREAK)
            break;
    }
    return FLOW_NORMAL;
}

static enum flow exec_node(struct jj_ctx *c, struct jj_scope *s, const struct jj_node *n)
{
    switch (n->kind) {
    case JN_TEXT:
        jj_buf_put(c, c->out, n->value.u.s.p, n->value.u.s.n);
        return FLOW_NORMAL;
    case JN_OUTPUT: jj_str_into(c, c->out, eval(c, s, n->a)); return FLOW_NORMAL;
    case JN_IF:
        if (jj_truthy(eval(c, s, n->a)))
            return exec_body(c, s, &n->body);
        return exec_body(c, s, &n->orelse);
    case JN_FOR: return exec_for(c, s, n);
    case JN_SET: assign(c, s, &n->targets, eval(c, s, n->a)); return FLOW_NORMAL;
    case JN_SET_BLOCK: {
        struct jj_value v = render_to_string(c, s, &n->body);
        assign(c, s, &n->targets, apply_filters(c, s, &n->args, v));
        return FLOW_NORMAL;
    }
    case JN_MACRO: {
        struct jj_func *fn = jj_alloc(c, sizeof *fn);
        fn->kind = JJ_FN_MACRO;
        fn->name = n->name;
        fn->node = n;
        fn->closure = s;
        scope_set(c, s, n->name, (struct jj_value){.kind = JJ_FUNC, .u.fn = fn});
        return FLOW_NORMAL;
    }
    case JN_CALL_BLOCK: {
        struct jj_func *caller = jj_alloc(c, sizeof *caller);
        caller->kind = JJ_FN_CALLER;
        caller->name = "caller";
        caller->node = n;
        caller->closure = s;
        const struct jj_node *call = n->a;
        struct jj_value callee = eval(c, s, call->a);
        struct jj_args a;
        eval_args(c, s, call, &a);
        /* append caller= to the keyword arguments */
        const char **names = jj_alloc(c, (a.n_kw + 1) * sizeof *names);
        struct jj_value *kw = jj_alloc(c, (a.n_kw + 1) * sizeof *kw);
        if (a.n_kw) {
            memcpy(names, a.kw_names, a.n_kw * sizeof *names);
            memcpy(kw, a.kw, a.n_kw * sizeof *kw);
        }
        names[a.n_kw] = "caller";
        kw[a.n_kw] = (struct jj_value){.kind = JJ_FUNC, .u.fn = caller};
        a.kw_names = names;
        a.kw = kw;
        a.n_kw++;
        jj_str_into(c, c->out, jj_call_value(c, callee, &a));
        return FLOW_NORMAL;
    }
    case JN_FILTER_BLOCK: {
        struct jj_scope *inner = scope_new(c, s);
        struct jj_value v = render_to_string(c, inner, &n->body);
        jj_str_into(c, c->out, apply_filters(c, s, &n->args, v));
        return FLOW_NORMAL;
    }
    case JN_WITH: {
        struct jj_scope *inner = scope_new(c, s);
        for (size_t i = 0; i < n->targets.n; i++)
            scope_set(c, inner, n->targets.items[i]->name, eval(c, s, n->args.items[i]));
        return exec_body(c, inner, &n->body);
    }
    case JN_SCOPE: return exec_body(c, s, &n->body);
    case JN_BREAK: return FLOW_BREAK;
    case JN_CONTINUE: return FLOW_CONTINUE;
    default:
        jj_fail(c, JJ_FAIL_RUNTIME, "line %d: not a statement", n->line);
    }
}

static enum flow exec_body(struct jj_ctx *c, struct jj_scope *s, const struct jj_nodes *body)
{
    for (size_t i = 0; i < body->n; i++) {
        enum flow f = exec_node(c, s, body->items[i]);
        if (f != FLOW_NORMAL)
            return f;
    }
    return FLOW_NORMAL;
}

/* ---- entry points --------------------------------------------------------------------------- */

const char *jj_intern_find(const struct splash_jinja_template *t, const char *name, size_t n)
{
    for (size_t i = 0; i < t->n_names; i++)
        if (strncmp(t->names[i], name, n) == 0 && t->names[i][n] == 0)
            return t->names[i];
    return NULL;
}

const char *jj_intern(struct splash_jinja_template *t, const char *name, size_t n)
{
    const char *found = jj_intern_find(t, name, n);
    if (found)
        return found;
    if (t->n_names == t->cap_names) {
        size_t cap = t->cap_names ? t->cap_names * 2 : 64;
        const char **names = jj_arena_alloc(&t->arena, cap * sizeof *names);
        if (!names)
            return NULL;
        if (t->n_names)
            memcpy(names, t->names, t->n_names * sizeof *names);
        t->names = names;
        t->cap_names = cap;
    }
    char *copy = jj_arena_strndup(&t->arena, name, n);
    if (!copy)
        return NULL;
    t->names[t->n_names++] = copy;
    return copy;
}

enum splash_status splash_jinja_parse(const char *src, size_t len,
                                      struct splash_jinja_template **out, struct splash_err *err)
{
    *out = NULL;
    struct splash_jinja_template *t = calloc(1, sizeof *t);
    if (!t)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "template: out of memory");
    jj_arena_init(&t->arena, 0);
    struct jj_tokens toks = {0};
    enum splash_status st = jj_lex(&t->arena, src, len, &toks, err);
    if (st == SPLASH_OK)
        st = jj_parse(t, &toks, err);
    if (st != SPLASH_OK) {
        splash_jinja_free(t);
        return st;
    }
    *out = t;
    return SPLASH_OK;
}

void splash_jinja_free(struct splash_jinja_template *t)
{
    if (!t)
        return;
    jj_arena_free(&t->arena);
    free(t);
}

/* Runs the template into buf; false when it failed (c->err says why). */
static bool run(struct jj_ctx *c, const json_t *vars, struct jj_buf *buf)
{
    if (setjmp(c->fail))
        return false;
    c->out = buf;
    if (vars && !json_is_object(vars))
        jj_fail(c, JJ_FAIL_RUNTIME, "template variables must be a JSON object");
    c->globals = scope_new(c, NULL);
    if (vars) {
        const char *key;
        size_t klen;
        json_t *val;
        json_object_keylen_foreach((json_t *)vars, key, klen, val) {
            /* a variable the template never names cannot be read */
            const char *name = jj_intern_find(c->tpl, key, klen);
            if (name && strlen(name) == klen)
                scope_set(c, c->globals, name, jj_from_json(c, val));
        }
    }
    exec_body(c, c->globals, &c->tpl->body);
    return true;
}

enum splash_status splash_jinja_render(const struct splash_jinja_template *t, const json_t *vars,
                                       const struct splash_jinja_render_opts *opts, char **out,
                                       size_t *out_len, struct splash_err *err)
{
    static const struct splash_jinja_limits defaults = {
        .max_output = 64u << 20, .max_memory = 512u << 20, .max_steps = 10000000,
        .max_depth = 200};
    *out = NULL;
    if (out_len)
        *out_len = 0;
    struct splash_err local_err;
    if (!err)
        err = &local_err;
    memset(err, 0, sizeof *err);
    char *message = opts && opts->message_size ? opts->message : NULL;
    if (message)
        message[0] = 0;
    struct jj_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        if (message)
            snprintf(message, opts->message_size, "out of memory");
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    c->tpl = t;
    c->err = err;
    c->limits = defaults;
    if (opts && opts->limits) {
        const struct splash_jinja_limits *l = opts->limits;
        if (l->max_output)
            c->limits.max_output = l->max_output;
        if (l->max_memory)
            c->limits.max_memory = l->max_memory;
        if (l->max_steps)
            c->limits.max_steps = l->max_steps;
        if (l->max_depth)
            c->limits.max_depth = l->max_depth;
    }
    c->now = opts && opts->now ? opts->now : (int64_t)time(NULL);
    c->message = message;
    c->message_size = message ? opts->message_size : 0;
    jj_arena_init(&c->arena, c->limits.max_memory);
    struct jj_buf buf = {0};
    enum splash_status st = SPLASH_OK;
    if (!run(c, vars, &buf)) {
        st = c->fail_kind == JJ_FAIL_NOMEM ? SPLASH_ERR_NOMEM
           : c->fail_kind == JJ_FAIL_LIMIT ? SPLASH_ERR_UNSUPPORTED : SPLASH_ERR_INVALID;
        goto out_free_ctx;
    }
    *out = malloc(buf.n + 1);
    if (!*out) {
        if (message)
            snprintf(message, opts->message_size, "out of memory");
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_free_ctx;
    }
    if (buf.n)
        memcpy(*out, buf.p, buf.n);
    (*out)[buf.n] = 0;
    if (out_len)
        *out_len = buf.n;
out_free_ctx:
    jj_arena_free(&c->arena);
    free(c);
    return st;
}
