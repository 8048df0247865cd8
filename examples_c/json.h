/* A tiny JSON reader for the golden vectors' cases.json: parses a whole document into a
   tree of nodes (objects, arrays, strings without escapes beyond \" \\ \/ \n \t, numbers,
   true/false/null). Enough for the manifest, not a general-purpose parser. C11. */
#ifndef Q4VK_EXAMPLES_JSON_H
#define Q4VK_EXAMPLES_JSON_H

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

typedef struct json {
    enum json_type type;
    char *key;           /* member name inside an object, else NULL */
    char *str;           /* JSON_STRING */
    double num;          /* JSON_NUMBER, JSON_BOOL */
    struct json *child;  /* first element / member */
    struct json *next;   /* next sibling */
} json;

typedef struct json_parser { const char *p, *end; int error; } json_parser;

static void json_ws(json_parser *ps) {
    while (ps->p < ps->end && isspace((unsigned char)*ps->p)) ps->p++;
}

static char *json_string(json_parser *ps) {
    if (ps->p >= ps->end || *ps->p != '"') { ps->error = 1; return NULL; }
    ps->p++;
    char *out = malloc((size_t)(ps->end - ps->p) + 1), *o = out;
    if (!out) { ps->error = 1; return NULL; }
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\' && ps->p < ps->end) {
            c = *ps->p++;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c; /* \" \\ \/ map to themselves */
        }
        *o++ = c;
    }
    if (ps->p >= ps->end) { ps->error = 1; free(out); return NULL; }
    ps->p++;
    *o = 0;
    return out;
}

static json *json_value(json_parser *ps, int depth) {
    json_ws(ps);
    json *v = calloc(1, sizeof *v);
    if (!v || ps->p >= ps->end || depth > 64) { ps->error = 1; free(v); return NULL; }
    char c = *ps->p;
    if (c == '{' || c == '[') {
        v->type = c == '{' ? JSON_OBJECT : JSON_ARRAY;
        char close = c == '{' ? '}' : ']';
        json **tail = &v->child;
        ps->p++;
        json_ws(ps);
        if (ps->p < ps->end && *ps->p == close) { ps->p++; return v; }
        while (!ps->error) {
            char *key = NULL;
            if (v->type == JSON_OBJECT) {
                json_ws(ps);
                key = json_string(ps);
                json_ws(ps);
                if (ps->error || ps->p >= ps->end || *ps->p++ != ':') { ps->error = 1; free(key); break; }
            }
            json *item = json_value(ps, depth + 1);
            if (!item) { free(key); break; }
            item->key = key;
            *tail = item;
            tail = &item->next;
            json_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
            if (ps->p < ps->end && *ps->p == close) { ps->p++; return v; }
            ps->error = 1;
        }
        return v; /* partial tree; the caller sees ps->error */
    }
    if (c == '"') {
        v->type = JSON_STRING;
        v->str = json_string(ps);
        return v;
    }
    if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "null", 4) || !strncmp(ps->p, "false", 5)) {
        v->type = c == 'n' ? JSON_NULL : JSON_BOOL;
        v->num = c == 't';
        ps->p += c == 'f' ? 5 : 4;
        return v;
    }
    char *stop;
    v->type = JSON_NUMBER;
    v->num = strtod(ps->p, &stop);
    if (stop == ps->p) ps->error = 1;
    ps->p = stop;
    return v;
}

static void json_free(json *v) {
    while (v) {
        json *next = v->next;
        json_free(v->child);
        free(v->key);
        free(v->str);
        free(v);
        v = next;
    }
}

/* Parses text[0..len); NULL on a syntax error. */
static json *json_parse(const char *text, size_t len) {
    json_parser ps = {text, text + len, 0};
    json *root = json_value(&ps, 0);
    json_ws(&ps);
    if (ps.error || ps.p != ps.end) { json_free(root); return NULL; }
    return root;
}

/* Member `key` of object `v`, or NULL. */
static const json *json_get(const json *v, const char *key) {
    if (!v || v->type != JSON_OBJECT) return NULL;
    for (const json *m = v->child; m; m = m->next)
        if (m->key && !strcmp(m->key, key)) return m;
    return NULL;
}

#endif
