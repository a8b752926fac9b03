/*
 * json_schema.h — JSON Schema (draft 2020-12, draft-07, and draft-04's
 * boolean exclusive bounds) → grammar IR.
 *
 * Supported: type, enum, const, properties, required, additionalProperties,
 * patternProperties (disjoint patterns), propertyNames (string keywords),
 * min/maxProperties, items / prefixItems / additionalItems, min/maxItems,
 * min/maxLength, pattern, format (date, time, date-time, duration, ipv4,
 * ipv6, hostname, email, uuid, uri, uri-reference, json-pointer,
 * relative-json-pointer; formats the spec does not define are annotations),
 * minimum / maximum / exclusive* (exact decimals), multipleOf (integers,
 * powers of ten, 0.5), anyOf, allOf (intersection), oneOf (a union when the
 * branches are provably exclusive, else "branch i and not the others"),
 * not / if-then-else (for negatable keywords: type, enum, const, required,
 * properties, pattern, lengths, bounds, multipleOf by an integer, anyOf,
 * allOf), dependencies /
 * dependentRequired / dependentSchemas, $ref / $defs / definitions / $id /
 * $anchor (local, recursion allowed), boolean schemas, uniqueItems when
 * trivially satisfied.
 * Anything else in the JSON Schema vocabulary is an error naming the keyword
 * (or ignored with lenient = 1); unknown keywords are annotations.
 *
 * Objects are generated with properties in schema order (then other keys);
 * whitespace between tokens is bounded (so_limits.whitespace_max).
 */
#ifndef DI_STRUCTURED_JSON_SCHEMA_H
#define DI_STRUCTURED_JSON_SCHEMA_H

#include "structured/grammar.h"

deepinfer_status so_json_schema_build(const char *schema, size_t len, const so_limits *lim, so_vocab *v, so_gb *b,
                                      int32_t *root, di_error *err);

#endif
