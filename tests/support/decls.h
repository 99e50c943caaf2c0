/* A family's tensor declarations held against a model file's tensors (model-check). */
#ifndef SPLASH_TEST_DECLS_H
#define SPLASH_TEST_DECLS_H

#include "splash/family.h"

struct splash_meta;

struct test_decls {
    int n;   /* declarations */
    int bad; /* missing non-optional tensors and shape mismatches, each printed */
};

/* fam->declare_tensors on m (which must succeed), each declaration against m's tensor. */
struct test_decls test_decls_check(const struct splash_family_plugin *fam,
                                   const struct splash_meta *m);

#endif
