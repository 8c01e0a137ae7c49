/* A structure-aware mutator for JSON inputs (libFuzzer's LLVMFuzzerCustomMutator
 * protocol): parse the input, apply a few edits to the tree, write it back.
 * Byte-level mutations rarely keep JSON valid and cannot change a number's
 * digit count (libFuzzer's ChangeASCIIInteger rewrites digits in place), so
 * they reach few of a validator's checks; edits on the tree do: integers set
 * to powers of two and their neighbours, multiplied by a power of two or
 * nudged; strings replaced by names from a vocabulary (the document's own
 * strings and keys plus what the target adds: op and dtype names ...);
 * array elements repeated, dropped or swapped; keys deleted or added with a
 * value copied from elsewhere in the document; any value replaced by a copy of
 * another or by a value of another type. A quarter of the calls hand the bytes
 * to libFuzzer's own mutators instead, so malformed JSON is fuzzed too.
 *
 * The mutator knows nothing of numval: the vocabulary is the target's. One
 * translation unit per fuzz target includes this file. */
#ifndef NUMVAL_FUZZ_JSON_MUTATE_H
#define NUMVAL_FUZZ_JSON_MUTATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define JM_MAX_NODES 4096
#define JM_MAX_WORDS 1024

typedef struct jm_node {
    json_t *v;       /* the value */
    json_t *parent;  /* its array or object, NULL for the root */
    size_t index;    /* in an array parent */
    const char *key; /* in an object parent */
} jm_node;

typedef struct jm_state {
    uint64_t rng;
    jm_node nodes[JM_MAX_NODES];
    size_t n_nodes;
    const char *words[JM_MAX_WORDS]; /* vocabulary: not owned */
    size_t n_words, n_fixed;         /* n_fixed: the target's words, kept across inputs */
} jm_state;

static uint64_t jm_rand(jm_state *s)
{
    /* xorshift64*: the stream is a function of libFuzzer's seed, so a mutation
     * replays from it. */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * UINT64_C(2685821657736338717);
}

static size_t jm_below(jm_state *s, size_t n)
{
    return n ? (size_t)(jm_rand(s) % n) : 0;
}

/* Add a word of the target's vocabulary (static storage). */
static inline void jm_add_fixed_word(jm_state *s, const char *w)
{
    if (w && s->n_fixed < JM_MAX_WORDS / 2)
        s->words[s->n_fixed++] = w;
    s->n_words = s->n_fixed;
}

static void jm_collect(jm_state *s, json_t *v, json_t *parent, size_t index, const char *key)
{
    if (s->n_nodes == JM_MAX_NODES)
        return;
    s->nodes[s->n_nodes++] = (jm_node){.v = v, .parent = parent, .index = index, .key = key};
    if (json_is_string(v) && s->n_words < JM_MAX_WORDS)
        s->words[s->n_words++] = json_string_value(v);
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) jm_collect(s, e, v, i, NULL);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e)
        {
            if (s->n_words < JM_MAX_WORDS)
                s->words[s->n_words++] = k;
            jm_collect(s, e, v, 0, k);
        }
    }
}

/* Put v (a new reference, stolen) where node n is; the root cannot be replaced. */
static bool jm_replace(jm_node *n, json_t *v)
{
    if (!v)
        return false;
    if (json_is_array(n->parent))
        return json_array_set_new(n->parent, n->index, v) == 0;
    if (json_is_object(n->parent)) {
        /* The key may be freed by the set: copy it first. */
        char *key = strdup(n->key);
        bool ok = key && json_object_set_new(n->parent, key, v) == 0;
        free(key);
        return ok;
    }
    json_decref(v);
    return false;
}

static json_t *jm_boundary_integer(jm_state *s)
{
    switch (jm_below(s, 8)) {
    case 0:
        return json_integer(0);
    case 1:
        return json_integer(jm_below(s, 2) ? INT64_MAX : INT64_MIN);
    case 2:
        return json_integer(-(json_int_t)jm_below(s, 3));
    default: {
        int k = (int)jm_below(s, 63);
        int64_t v = (INT64_C(1) << k) + (int64_t)jm_below(s, 3) - 1;
        return json_integer(v);
    }
    }
}

static json_t *jm_mutate_integer(jm_state *s, int64_t v)
{
    int64_t out;
    switch (jm_below(s, 5)) {
    case 0:
    case 1:
        return jm_boundary_integer(s);
    case 2:
        if (__builtin_mul_overflow(v, INT64_C(1) << (1 + jm_below(s, 40)), &out))
            return jm_boundary_integer(s);
        return json_integer(out);
    case 3:
        if (__builtin_add_overflow(v, (int64_t)jm_below(s, 17) - 8, &out))
            return jm_boundary_integer(s);
        return json_integer(out);
    default:
        return json_integer(v / 2);
    }
}

static json_t *jm_other_type(jm_state *s)
{
    switch (jm_below(s, 8)) {
    case 0:
        return json_null();
    case 1:
        return json_boolean(jm_below(s, 2));
    case 2:
        return json_array();
    case 3:
        return json_object();
    case 4:
        return json_string("");
    case 5:
        return json_real(jm_below(s, 2) ? 0.5 : -1e300);
    case 6:
        return s->n_words ? json_string(s->words[jm_below(s, s->n_words)]) : json_string("x");
    default:
        return jm_boundary_integer(s);
    }
}

/* One edit at a random node. Returns whether the tree changed. */
static bool jm_edit(jm_state *s, json_t *root)
{
    s->n_nodes = 0;
    s->n_words = s->n_fixed;
    jm_collect(s, root, NULL, 0, NULL);
    jm_node *n = &s->nodes[jm_below(s, s->n_nodes)];
    jm_node *other = &s->nodes[jm_below(s, s->n_nodes)];
    if (json_is_integer(n->v) && jm_below(s, 4))
        return jm_replace(n, jm_mutate_integer(s, json_integer_value(n->v)));
    if (json_is_string(n->v) && jm_below(s, 4) && s->n_words)
        return jm_replace(n, json_string(s->words[jm_below(s, s->n_words)]));
    if (json_is_array(n->v) && jm_below(s, 3)) {
        size_t len = json_array_size(n->v);
        switch (jm_below(s, 4)) {
        case 0:
        case 1: { /* repeat an element 1-4 times, or insert a copy of any value */
            if (len && jm_below(s, 3)) {
                json_t *e = json_array_get(n->v, jm_below(s, len));
                bool ok = true;
                for (size_t k = 1 + jm_below(s, 4); ok && k > 0; k--)
                    ok = json_array_insert_new(n->v, jm_below(s, len + 1), json_deep_copy(e)) == 0;
                return ok;
            }
            return other->v != n->v &&
                   json_array_insert_new(n->v, jm_below(s, len + 1), json_deep_copy(other->v)) == 0;
        }
        case 2:
            return len && json_array_remove(n->v, jm_below(s, len)) == 0;
        default: {
            if (len < 2)
                return false;
            size_t a = jm_below(s, len), b = jm_below(s, len);
            json_t *x = json_incref(json_array_get(n->v, a));
            json_array_set(n->v, a, json_array_get(n->v, b));
            json_array_set_new(n->v, b, x);
            return a != b;
        }
        }
    }
    if (json_is_object(n->v) && jm_below(s, 3)) {
        size_t len = json_object_size(n->v);
        if (len && jm_below(s, 2)) {
            size_t k = jm_below(s, len), i = 0;
            const char *key;
            json_t *e;
            json_object_foreach(n->v, key, e)
            {
                if (i++ == k)
                    return json_object_del(n->v, key) == 0;
            }
            return false;
        }
        if (!s->n_words || other->v == n->v)
            return false;
        char *key = strdup(s->words[jm_below(s, s->n_words)]);
        bool ok = key && json_object_set_new(n->v, key, json_deep_copy(other->v)) == 0;
        free(key);
        return ok;
    }
    if (other->v != n->v && jm_below(s, 2))
        return jm_replace(n, json_deep_copy(other->v));
    return jm_replace(n, jm_other_type(s));
}

/* The body of LLVMFuzzerCustomMutator. */
static size_t jm_mutate(jm_state *s, uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
    s->rng = (uint64_t)seed * UINT64_C(0x9E3779B97F4A7C15) + 1;
    json_t *root =
        jm_below(s, 4) ? json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL) : NULL;
    if (!root)
        return LLVMFuzzerMutate(data, size, max_size);
    int edits = 1 + (int)jm_below(s, 6);
    for (int i = 0; i < edits; i++)
        jm_edit(s, root);
    char *out = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(root);
    size_t len = out ? strlen(out) : 0;
    if (!out || len > max_size) {
        free(out);
        return LLVMFuzzerMutate(data, size, max_size);
    }
    memcpy(data, out, len);
    free(out);
    return len;
}

#endif
