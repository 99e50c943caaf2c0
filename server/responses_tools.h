/* A Responses request's tools as the model sees them: function tools as they are, the
 * function tools of a namespace ({"type": "namespace", "name", "tools": [...]}, as Codex groups
 * its tools) flattened beside them, and hosted tools the server cannot run (web_search,
 * file_search, code_interpreter, computer use, mcp, ...) left out with a console note. Calls
 * name a namespaced tool back to the client as it knows it: its own name and its namespace. */
#ifndef SPLASH_SERVER_RESPONSES_TOOLS_H
#define SPLASH_SERVER_RESPONSES_TOOLS_H

#include <jansson.h>
#include <stddef.h>

struct splash_responses_tools {
    json_t *flat;      /* Responses-shape function tools, under the names the model sees */
    json_t *to_client; /* model name -> {"name", "namespace"}, for namespaced tools */
    json_t *to_model;  /* "<namespace>\n<name>" -> model name */
};

/* Reads tools (absent or null: none). -1 with msg naming the tool on a bad one. */
int splash_responses_tools_read(const json_t *tools, struct splash_responses_tools *out,
                                char *msg, size_t msg_size);
void splash_responses_tools_free(struct splash_responses_tools *t);

/* The model's name for the tool a client's function_call names (ns may be NULL). */
const char *splash_responses_tools_model_name(const struct splash_responses_tools *t,
                                              const char *name, const char *ns);

/* Sets a call item's "name", and "namespace" for a namespaced tool, from the model's name;
 * to_client is a splash_responses_tools's (NULL: no namespaces). */
void splash_responses_tools_name_call(const json_t *to_client, json_t *item,
                                      const char *model_name, size_t len);

#endif
