/* AST reading and rewriting for the template probe (server/chat/ only). */
#ifndef SPLASH_SERVER_CHAT_JINJA_AST_H
#define SPLASH_SERVER_CHAT_JINJA_AST_H

#include "server/chat/jinja_internal.h"

/* While cloning, messages[0] (from = the interned "messages") becomes the name `to`. */
struct jj_ast_subst {
    const char *from;
    const char *to;
};

struct jj_node *jj_ast_new(struct splash_jinja_template *t, enum jj_node_kind kind, int line);
bool jj_ast_push(struct splash_jinja_template *t, struct jj_nodes *l, struct jj_node *n);
/* Deep copy into t's arena (NULL on allocation failure). */
struct jj_node *jj_ast_clone(struct splash_jinja_template *t, const struct jj_node *n,
                             const struct jj_ast_subst *s);
/* Does the expression compare some x.role with the string role (op 0: any comparison)? */
bool jj_ast_tests_role(const struct jj_node *n, const char *role, int op);
bool jj_ast_is_first_message(const struct jj_node *n, const char *messages);
/* Is n a call of the global fn, as in raise_exception(...)? */
bool jj_ast_is_call_to(const struct jj_node *n, const char *fn);

#endif
