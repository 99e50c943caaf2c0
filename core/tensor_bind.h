/* A family's declaration list bound into its model (host->bind_tensors, unbind_tensors). */
#ifndef SPLASH_CORE_TENSOR_BIND_H
#define SPLASH_CORE_TENSOR_BIND_H

#include "splash/family.h"

/* Walks declare(host, m, model, ...): each declaration's tensor is checked (present unless
 * optional, a format decodes it, the declared shape, mapped), then bound into its dst
 * (SPLASH_BIND_*); *bytes gets the bytes of the tensors bound (each once). The first
 * problem stops it, naming the file and tensor, with everything bound so far unbound.
 * Tensors to read into memory beyond the room the host has free (MemAvailable, the
 * cgroup limit) are refused first, before any is read. */
enum splash_status splash_tensors_bind(const struct splash_host *host, const struct splash_meta *m,
                                       splash_declare_fn declare, void *model, uint64_t *bytes,
                                       struct splash_err *err);
/* Frees what bind put in every dst of the list and clears them (NULL ones are skipped). */
void splash_tensors_unbind(const struct splash_host *host, const struct splash_meta *m,
                           splash_declare_fn declare, void *model);

#endif
