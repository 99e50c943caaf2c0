/* make-model's shapes: the size presets families export (splash/family.h, ABI 1.4),
 * copied so that --dims can edit them. The writer names no family: a shape is
 * general.architecture, the <arch>.* metadata values in their order, a vocabulary size and
 * whether the head is tied; the family claiming the architecture declares the tensors. */
#ifndef SPLASH_MODELGEN_MODEL_SHAPE_H
#define SPLASH_MODELGEN_MODEL_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "splash/family.h"
#include "splash/status.h"

struct splash_registry;

#define SPLASH_MODEL_SHAPE_MAX_VALUES 48

/* One <arch>.<key> value (struct splash_preset_value, owned). */
struct splash_model_value {
    char key[64];
    int32_t kind; /* enum splash_preset_kind */
    uint32_t n;   /* arrays: elements of nums */
    double num;
    double nums[SPLASH_PRESET_MAX_ARRAY];
    char str[128];
};

struct splash_model_shape {
    char name[48];   /* the preset's, or "custom" once --dims edited it */
    char arch[32];   /* general.architecture */
    char family[64]; /* the plugin whose preset it is */
    char about[160];
    int64_t n_vocab;
    int32_t tied;    /* no output.weight */
    char chat_format[16]; /* the preset's: the vocabulary's special tokens */
    size_t n_values;
    struct splash_model_value values[SPLASH_MODEL_SHAPE_MAX_VALUES];
};

/* Every registered family's presets, in registry order. */
size_t splash_model_shape_count(const struct splash_registry *r);
enum splash_status splash_model_shape_at(const struct splash_registry *r, size_t i,
                                         struct splash_model_shape *out, struct splash_err *err);

/* The preset called name. arch (NULL: any) is a family plugin's name or a GGUF
 * architecture; a preset of another family or architecture is refused, naming both. name
 * NULL: arch's smallest preset (hidden size times layers), the one --dims edits alone. */
enum splash_status splash_model_shape_find(const struct splash_registry *r, const char *arch,
                                           const char *name, struct splash_model_shape *out,
                                           struct splash_err *err);

/* The value of <arch>.<key> (an array's first element); 0 when the shape has none. */
double splash_model_shape_get(const struct splash_model_shape *s, const char *key);

/* Applies "key=value,key=value": a metadata key of the shape (the part after "<arch>.",
 * e.g. embedding_length=512, rope.dimension_sections=8/4/4/0: arrays as A/B/...), vocab
 * (the vocabulary size) or tied (0/1). Values are checked against the key's kind; errors
 * name the key. */
enum splash_status splash_model_shape_parse_dims(struct splash_model_shape *s, const char *dims,
                                                 struct splash_err *err);

#endif
