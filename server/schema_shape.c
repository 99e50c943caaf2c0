#include "server/schema_shape.h"

#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 64

static int known_type(const json_t *t)
{
    static const char *const types[] = {"null", "boolean", "object", "array",
                                        "number", "string", "integer", NULL};
    const char *s = json_string_value(t);
    for (int i = 0; s && types[i]; i++)
        if (!strcmp(s, types[i]))
            return 1;
    return 0;
}

static int bad(char *msg, size_t size, const char *path, const char *what)
{
    snprintf(msg, size, "%s: %s", path, what);
    return -1;
}

static int check(const json_t *s, const char *path, int depth, char *msg, size_t size);

static int check_list(const json_t *v, const char *path, const char *key, int depth, char *msg,
                      size_t size)
{
    char sub[512];
    if (!json_is_array(v) || !json_array_size(v))
        return snprintf(sub, sizeof sub, "%.400s.%.100s", path, key),
               bad(msg, size, sub, "must be a non-empty array of schemas");
    for (size_t i = 0; i < json_array_size(v); i++) {
        snprintf(sub, sizeof sub, "%.400s.%.60s[%zu]", path, key, i);
        if (check(json_array_get(v, i), sub, depth + 1, msg, size))
            return -1;
    }
    return 0;
}

static int check(const json_t *s, const char *path, int depth, char *msg, size_t size)
{
    if (json_is_boolean(s))
        return 0;
    if (!json_is_object(s))
        return bad(msg, size, path, "a schema must be an object or a boolean");
    if (depth > MAX_DEPTH)
        return bad(msg, size, path, "nested more than 64 deep");
    char sub[512];
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        snprintf(sub, sizeof sub, "%.400s.%.100s", path, k);
        if (!strcmp(k, "type")) {
            if (json_is_array(v)) {
                if (!json_array_size(v))
                    return bad(msg, size, sub, "must name at least one type");
                for (size_t i = 0; i < json_array_size(v); i++)
                    if (!known_type(json_array_get(v, i)))
                        return bad(msg, size, sub, "has a value that is not a JSON Schema type");
            } else if (!known_type(v)) {
                return bad(msg, size, sub,
                           "must be null, boolean, object, array, number, string or integer");
            }
        } else if (!strcmp(k, "properties") || !strcmp(k, "$defs") || !strcmp(k, "definitions")) {
            if (!json_is_object(v))
                return bad(msg, size, sub, "must be an object of schemas");
            const char *name;
            json_t *p;
            json_object_foreach(v, name, p) {
                char psub[768];
                snprintf(psub, sizeof psub, "%.500s.%.200s", sub, name);
                if (check(p, psub, depth + 1, msg, size))
                    return -1;
            }
        } else if (!strcmp(k, "required")) {
            if (!json_is_array(v))
                return bad(msg, size, sub, "must be an array of property names");
            for (size_t i = 0; i < json_array_size(v); i++)
                if (!json_is_string(json_array_get(v, i)))
                    return bad(msg, size, sub, "must be an array of property names");
        } else if (!strcmp(k, "items") || !strcmp(k, "additionalProperties") ||
                   !strcmp(k, "not")) {
            if (json_is_array(v) && !strcmp(k, "items")) {
                if (check_list(v, path, k, depth, msg, size))
                    return -1;
            } else if (check(v, sub, depth + 1, msg, size)) {
                return -1;
            }
        } else if (!strcmp(k, "anyOf") || !strcmp(k, "oneOf") || !strcmp(k, "allOf") ||
                   !strcmp(k, "prefixItems")) {
            if (check_list(v, path, k, depth, msg, size))
                return -1;
        } else if (!strcmp(k, "enum")) {
            if (!json_is_array(v))
                return bad(msg, size, sub, "must be an array");
        } else if (!strcmp(k, "minLength") || !strcmp(k, "maxLength") || !strcmp(k, "minItems") ||
                   !strcmp(k, "maxItems") || !strcmp(k, "minProperties") ||
                   !strcmp(k, "maxProperties")) {
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return bad(msg, size, sub, "must be a non-negative integer");
        } else if (!strcmp(k, "minimum") || !strcmp(k, "maximum") || !strcmp(k, "multipleOf")) {
            if (!json_is_number(v))
                return bad(msg, size, sub, "must be a number");
        }
    }
    return 0;
}

int splash_schema_shape_check(const json_t *schema, const char *field, char *msg, size_t msg_size)
{
    return check(schema, field, 0, msg, msg_size);
}
