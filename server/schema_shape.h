/* Whether a tool's parameters are a JSON Schema at all (the keywords a schema's
 * shape depends on have values of the right kind), so a broken schema is a 400
 * naming its path under any tool_choice, not only when a grammar is built from
 * it. Keywords the grammar cannot enforce are not judged here. */
#ifndef SPLASH_SERVER_SCHEMA_SHAPE_H
#define SPLASH_SERVER_SCHEMA_SHAPE_H

#include <jansson.h>
#include <stddef.h>

/* 0 when schema is well formed; else -1 with msg naming the path under field. */
int splash_schema_shape_check(const json_t *schema, const char *field, char *msg, size_t msg_size);

#endif
