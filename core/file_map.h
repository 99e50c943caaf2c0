/* Read-only file mappings the core made, remembered so that code holding a pointer can
 * ask whether its bytes are file pages (which madvise(MADV_DONTNEED) drops and the
 * kernel reads back on access) rather than memory of its own (which it would zero). */
#ifndef SPLASH_FILE_MAP_H
#define SPLASH_FILE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "splash/status.h"

/* mmap(PROT_READ, MAP_PRIVATE) of size bytes of fd; MAP_FAILED (errno set) on failure. */
void *splash_file_map(int fd, size_t size);
/* The same, remembering the file's path for splash_file_map_locate. */
void *splash_file_map_path(int fd, size_t size, const char *path);
void splash_file_unmap(void *map, size_t size);
/* The file and offset of [p, p + n) inside one mapping made with a path (host->locate_bytes);
 * SPLASH_ERR_NOT_FOUND otherwise. */
enum splash_status splash_file_map_locate(const void *p, size_t n, char *path, size_t path_size,
                                          uint64_t *offset);
/* 1 if [p, p + n) lies inside one mapping made by splash_file_map. */
int splash_file_map_contains(const void *p, size_t n);
/* Drops the whole pages inside [p, p + n) of a file mapping from this process's memory;
 * returns the bytes dropped (0 when p is not in a file mapping). */
size_t splash_file_map_drop(const void *p, size_t n);

#endif
