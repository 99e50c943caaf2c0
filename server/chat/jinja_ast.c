/* Reading and rewriting a parsed template's AST, for the startup probe's patches. */
#include <string.h>

#include "server/chat/jinja_ast.h"

struct jj_node *jj_ast_new(struct splash_jinja_template *t, enum jj_node_kind kind, int line)
{
    struct jj_node *n = jj_arena_alloc(&t->arena, sizeof *n);
    if (n) {
        n->kind = kind;
        n->line = line;
    }
    return n;
}

bool jj_ast_push(struct splash_jinja_template *t, struct jj_nodes *l, struct jj_node *n)
{
    struct jj_node **items = jj_arena_alloc(&t->arena, (l->n + 1) * sizeof *items);
    if (!items)
        return false;
    if (l->n)
        memcpy(items, l->items, l->n * sizeof *items);
    items[l->n++] = n;
    l->items = items;
    return true;
}

static bool clone_list(struct splash_jinja_template *t, struct jj_nodes *dst,
                       const struct jj_nodes *src, const struct jj_ast_subst *s);

struct jj_node *jj_ast_clone(struct splash_jinja_template *t, const struct jj_node *n,
                             const struct jj_ast_subst *s)
{
    if (!n)
        return NULL;
    /* messages[0] -> the loop's message */
    if (s && n->kind == JN_GETITEM && n->a && n->a->kind == JN_NAME && n->a->name == s->from &&
        n->b && n->b->kind == JN_CONST && n->b->value.kind == JJ_INT && n->b->value.u.i == 0) {
        struct jj_node *r = jj_ast_new(t, JN_NAME, n->line);
        if (r)
            r->name = s->to;
        return r;
    }
    struct jj_node *c = jj_arena_alloc(&t->arena, sizeof *c);
    if (!c)
        return NULL;
    *c = *n;
    c->body = c->orelse = c->targets = c->args = c->kwnames = c->kwargs = (struct jj_nodes){0};
    if ((n->a && !(c->a = jj_ast_clone(t, n->a, s))) ||
        (n->b && !(c->b = jj_ast_clone(t, n->b, s))) ||
        (n->c && !(c->c = jj_ast_clone(t, n->c, s))) ||
        (n->d && !(c->d = jj_ast_clone(t, n->d, s))))
        return NULL;
    if (!clone_list(t, &c->body, &n->body, s) || !clone_list(t, &c->orelse, &n->orelse, s) ||
        !clone_list(t, &c->targets, &n->targets, s) || !clone_list(t, &c->args, &n->args, s) ||
        !clone_list(t, &c->kwnames, &n->kwnames, s) || !clone_list(t, &c->kwargs, &n->kwargs, s))
        return NULL;
    return c;
}

static bool clone_list(struct splash_jinja_template *t, struct jj_nodes *dst,
                       const struct jj_nodes *src, const struct jj_ast_subst *s)
{
    if (!src->n)
        return true;
    dst->items = jj_arena_alloc(&t->arena, src->n * sizeof *dst->items);
    if (!dst->items)
        return false;
    for (size_t i = 0; i < src->n; i++) {
        /* NULL entries are macro parameters without a default */
        if (src->items[i] && !(dst->items[i] = jj_ast_clone(t, src->items[i], s)))
            return false;
    }
    dst->n = src->n;
    return true;
}

static bool is_str_const(const struct jj_node *n, const char *s)
{
    return n && n->kind == JN_CONST && n->value.kind == JJ_STR &&
           n->value.u.s.n == strlen(s) && memcmp(n->value.u.s.p, s, n->value.u.s.n) == 0;
}

/* x.role or x['role'] */
static bool is_role(const struct jj_node *n)
{
    if (!n)
        return false;
    if (n->kind == JN_GETATTR)
        return strcmp(n->name, "role") == 0;
    return n->kind == JN_GETITEM && is_str_const(n->b, "role");
}

bool jj_ast_tests_role(const struct jj_node *n, const char *role, int op)
{
    if (!n)
        return false;
    if (n->kind == JN_COMPARE) {
        const struct jj_node *left = n->a;
        for (size_t i = 0; i < n->args.n; i++) {
            const struct jj_node *right = n->args.items[i];
            if ((op == 0 || n->ops[i] == op) &&
                ((is_role(left) && is_str_const(right, role)) ||
                 (is_role(right) && is_str_const(left, role))))
                return true;
            if ((op == 0 || n->ops[i] == op) && n->ops[i] == JJ_OP_NOTIN && is_role(left) &&
                right->kind == JN_LIST)
                for (size_t k = 0; k < right->args.n; k++)
                    if (is_str_const(right->args.items[k], role))
                        return true;
            left = right;
        }
    }
    return jj_ast_tests_role(n->a, role, op) || jj_ast_tests_role(n->b, role, op) ||
           jj_ast_tests_role(n->c, role, op);
}

bool jj_ast_is_first_message(const struct jj_node *n, const char *messages)
{
    /* messages[0] */
    return n && n->kind == JN_GETITEM && n->a && n->a->kind == JN_NAME &&
           n->a->name == messages && n->b && n->b->kind == JN_CONST &&
           n->b->value.kind == JJ_INT && n->b->value.u.i == 0;
}

bool jj_ast_is_call_to(const struct jj_node *n, const char *fn)
{
    if (!n)
        return false;
    if (n->kind == JN_CALL && n->a && n->a->kind == JN_NAME && strcmp(n->a->name, fn) == 0)
        return true;
    return false;
}
