/*
 * json_formats.h — JSON Schema `format` → regex over the decoded string.
 */
#ifndef DI_STRUCTURED_JSON_FORMATS_H
#define DI_STRUCTURED_JSON_FORMATS_H

/* 1: enforced (*re = full-match regex; *max_len = a length limit in
 * characters or -1); -1: a spec-defined format we do not enforce (the caller
 * reports it); 0: not a spec format (an annotation, ignored). */
int so_format_regex(const char *name, const char **re, int *max_len);

/* A search regex that strings of this format must NOT match (checks a
 * regular language cannot express positively), or 0 with *re = NULL. */
int so_format_exclude(const char *name, const char **re);

#endif
