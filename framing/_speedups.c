/*
 * framing._speedups: the compiled fast path of chunkwire's codec core.
 *
 * Contract: this module only ever does work that the pure-Python core
 * (framing/_decoder.py, framing/_encoder.py: the reference) would do with the
 * same result, and hands back everything else.  The decoder's Reader builds
 * a whole top-level object made of the built-in kinds (INT, NEG, BIGINT,
 * BIGNEG, BYTES, STRING, FLOAT, SIMPLE, and list, tuple, dict, set and
 * frozenset of them) that lies whole in one buffer, calling Python only for
 * records (their builder) and for nested types (their unslicer, run where
 * the type sits: see Nested); the moment it meets anything else (an open
 * type it does not build, a token the grammar or a limit would refuse, a
 * value the Python core would check further, the end of the buffer, an
 * exception from Python) it drops what it built of that object and reports
 * that it stopped at the object's first byte, where the Python decoder
 * takes over.  Nothing is committed for an object until it is complete, so
 * a hand-back never changes state (a nested type's unslicer may have run:
 * only those declared rebuildable are).  Its frame() only finds a frame's
 * headers (framing/_scanner.py FrameHeaders, its pure twin), and commits
 * nothing: the decoder takes them.  The
 * encoder likewise writes a whole object made of exact built-in types, or
 * returns None and the Python encoder writes it.
 *
 * Memory safety: every read is checked against the end of the buffer before
 * it is made, lengths are size_t or unsigned long long compared against
 * what is left (never added to a position before the check), and output
 * growth checks for overflow.  Recursion is bounded by MAX_RECURSION.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* Token kinds (framing/wire.py). */
enum {
    K_INT = 0x0, K_NEG = 0x1, K_BYTES = 0x2, K_STRING = 0x3, K_BIGINT = 0x4,
    K_BIGNEG = 0x5, K_FLOAT = 0x6, K_OPEN = 0x7, K_CLOSE = 0x8, K_ABORT = 0x9,
    K_SIMPLE = 0xA, K_ERROR = 0xB, K_PING = 0xC, K_PONG = 0xD
};

#define INLINE_LIMIT 12
#define MAX_RECURSION 512
/* Bytes bodies at least this long are left to the Python encoder, which
   keeps them by reference (framing/_blocks.py LARGE_PIECE). */
#define LARGE_PIECE (32 * 1024)

/* What a parse step reports besides a Python error. */
#define OK 1
#define HAND_BACK 0
#define FAILED (-1)

/* Container kinds the reader builds, by index into its cost tables. */
enum { C_LIST = 0, C_TUPLE = 1, C_DICT = 2, C_SET = 3, C_FROZENSET = 4, C_COUNT = 5 };

static const unsigned long long HASH_MODULUS = (1ULL << 61) - 1;

/* ------------------------------------------------------------------------ */
/* The decoder's Reader                                                      */

/* An open type whose unslicer declares a record builder (framing/_core.py):
   its children are parsed here like a tuple's, then build(items) returns
   the object its finish() would, or None where it would check further. */
#define MAX_RECORDS 8
typedef struct {
    PyObject *name;  /* bytes */
    PyObject *build;
    unsigned long long open_cost;
    unsigned long long item_cost;
    unsigned long long max_items; /* Limits.max_items plus the type's extra items */
    PyObject *message;            /* an RPC message's type, whose commonest shapes are built here, or NULL */
    Py_ssize_t max_name;          /* ... and the longest method name it takes */
} Record;

/* An open type the reader does not build, whose Python unslicer it runs
   where the type sits (framing/_core.py nested_types): the unslicer is
   made, told each child's header and given each child (built here) as the
   Python decoder would, and finished; the built-ins around and inside it
   stay here.  Only unslicers declared rebuildable are run: if the object
   around one is then handed back, Python builds it again. */
#define MAX_NESTED 64
typedef struct {
    PyObject *name;  /* bytes */
    PyObject *factory;
    unsigned long long open_cost;
    int checks_tokens; /* its check_token is called at each child's header */
} Nested;

/* A frame type (framing/_scanner.py FrameHeaders): OPEN name, `values` INTs,
   then a BYTES body, whose headers Reader.frame finds in one call. */
#define MAX_FRAMES 4
#define MAX_FRAME_VALUES 4
typedef struct {
    PyObject *name; /* bytes */
    Py_ssize_t values;
} Frame;

typedef struct {
    PyObject_HEAD
    PyObject *results; /* the decoder's result list, or NULL */
    PyObject *stack;   /* the decoder's unslicer stack, or NULL */
    unsigned long long max_header;
    unsigned long long max_bytes;
    unsigned long long max_string;
    unsigned long long max_open_name;
    unsigned long long max_depth;
    unsigned long long max_items;
    unsigned long long max_object_items;
    unsigned long long max_object_memory;
    unsigned long long max_bigint;
    int builds[C_COUNT];                     /* the registry maps the name to the built-in unslicer */
    unsigned long long open_cost[C_COUNT];   /* the unslicer classes' open_cost */
    unsigned long long item_cost[C_COUNT];   /* ... and item_cost */
    int plain_keys;                          /* str and bytes keys are untracked (hash randomization on) */
    unsigned long long tracked_key_cost;     /* bytes charged per tracked key (builtin.TRACKED_KEY_COST) */
    Py_ssize_t record_count;
    Record records[MAX_RECORDS];             /* the open types built through a Python record builder */
    PyObject *limits;                        /* the Limits object the unslicer factories take, or NULL */
    PyObject *nothing;                       /* framing.slicing._interfaces.NOTHING */
    unsigned long long child_cost;           /* bytes charged per child of a nested type (budget.DEFAULT_ITEM_COST) */
    Py_ssize_t nested_count;
    Nested nested[MAX_NESTED];               /* the open types whose Python unslicer is run here */
    int cut;                                 /* the last read stopped only because its buffer ended */
    Py_ssize_t frame_count;
    Frame frames[MAX_FRAMES];                /* the frame types Reader.frame finds (add_frame) */
} Reader;

typedef struct {
    const unsigned char *data;
    size_t pos;
    size_t end;
    Reader *reader;
    unsigned long long items; /* the object's items so far (its budget) */
    unsigned long long cost;  /* its estimated bytes beyond its wire bytes */
    size_t start;             /* where the top-level object begins */
    int whole;                /* it was seen to end inside the buffer */
    int cut;                  /* it handed back only because the buffer ended */
} Parse;

typedef struct {
    int kind;
    unsigned long long value;
} Header;

/* Read the header at ps->pos; HAND_BACK if it is incomplete or anything the
   Python scanner would look at twice (reserved, too wide, non-canonical). */
static int
read_header(Parse *ps, Header *header)
{
    static const unsigned char widths[4] = {1, 2, 4, 8};
    static const unsigned long long least[4] = {INLINE_LIMIT, 1ULL << 8, 1ULL << 16, 1ULL << 32};
    unsigned char first;
    unsigned int code, width, i;
    unsigned long long value = 0;

    if (ps->pos >= ps->end) {
        ps->cut = 1;
        return HAND_BACK;
    }
    first = ps->data[ps->pos];
    header->kind = first >> 4;
    if (header->kind > K_PONG)
        return HAND_BACK;
    code = first & 0x0F;
    if (code < INLINE_LIMIT) {
        header->value = code;
        ps->pos += 1;
        return OK;
    }
    width = widths[code - INLINE_LIMIT];
    if (1ULL + width > ps->reader->max_header)
        return HAND_BACK;
    if (ps->end - ps->pos < (size_t)width + 1) {
        /* Cut, unless the bytes present already prove the value too small for
           its width (zero high bytes over half of it): the Python scanner
           refuses those at once (framing.wire._check_partial). */
        unsigned int half = width / 2, zeros = 0;
        if (half && ps->end - ps->pos - 1 >= half)
            for (zeros = 1, i = 1; i <= half; i++)
                zeros = zeros && ps->data[ps->pos + i] == 0;
        ps->cut = !zeros;
        return HAND_BACK;
    }
    for (i = 1; i <= width; i++)
        value = (value << 8) | ps->data[ps->pos + i];
    if (value < least[code - INLINE_LIMIT])
        return HAND_BACK;
    header->value = value;
    ps->pos += (size_t)width + 1;
    return OK;
}

/* Take a body of header->value bytes at ps->pos, at most `limit` long. */
static int
take_body(Parse *ps, const Header *header, unsigned long long limit, const unsigned char **body)
{
    if (header->value > limit)
        return HAND_BACK;
    if (header->value > (unsigned long long)(ps->end - ps->pos)) {
        ps->cut = 1;
        return HAND_BACK;
    }
    *body = ps->data + ps->pos;
    ps->pos += (size_t)header->value;
    return OK;
}

static double
unpack_double(const unsigned char *p)
{
    uint64_t bits = 0;
    double value;
    int i;
    for (i = 0; i < 8; i++)
        bits = (bits << 8) | p[i];
    memcpy(&value, &bits, sizeof value);
    return value;
}

static int parse_value(Parse *ps, unsigned long long depth, PyObject **out);

/* Charge a closed container to the object's budget as ObjectBudget does
   (its own size, then a slot and an allowance per item); HAND_BACK once the
   object is over either limit, so that Python refuses it in its own words. */
static int
charge_costs(Parse *ps, unsigned long long open_cost, unsigned long long item_cost, Py_ssize_t length,
             unsigned long long extra)
{
    Reader *r = ps->reader;
    unsigned long long n = (unsigned long long)length;
    ps->items += n;
    ps->cost += open_cost + n * item_cost + extra;
    if (ps->items > r->max_object_items || ps->cost > r->max_object_memory)
        return HAND_BACK;
    return OK;
}

static int
charge(Parse *ps, int which, Py_ssize_t length, unsigned long long extra)
{
    return charge_costs(ps, ps->reader->open_cost[which], ps->reader->item_cost[which], length, extra);
}

/* Is the next token a CLOSE?  (Consumed if so; any other CLOSE hands back.) */
static int
at_close(Parse *ps, int *closed)
{
    unsigned char first;
    if (ps->pos >= ps->end) {
        ps->cut = 1;
        return HAND_BACK;
    }
    first = ps->data[ps->pos];
    *closed = (first >> 4) == K_CLOSE;
    if (*closed) {
        if (first != (K_CLOSE << 4))
            return HAND_BACK; /* CLOSE with a value, or a wide one */
        ps->pos += 1;
    }
    return OK;
}

/* Parse values up to the CLOSE into *out, a new list of at most max_items. */
static int
parse_items(Parse *ps, unsigned long long depth, unsigned long long max_items, PyObject **out)
{
    PyObject *items = PyList_New(0), *item;
    int status, closed;

    if (items == NULL)
        return FAILED;
    for (;;) {
        status = at_close(ps, &closed);
        if (status != OK || closed)
            break;
        if ((unsigned long long)PyList_GET_SIZE(items) >= max_items) {
            status = HAND_BACK;
            break;
        }
        status = parse_value(ps, depth, &item);
        if (status != OK)
            break;
        status = PyList_Append(items, item) < 0 ? FAILED : OK;
        Py_DECREF(item);
        if (status != OK)
            break;
    }
    if (status != OK) {
        Py_DECREF(items);
        return status;
    }
    *out = items;
    return OK;
}

static int
parse_sequence(Parse *ps, unsigned long long depth, int which, PyObject **out)
{
    PyObject *items;
    int status = parse_items(ps, depth, ps->reader->max_items, &items);

    if (status != OK)
        return status;
    status = charge(ps, which, PyList_GET_SIZE(items), 0);
    if (status == OK && which == C_TUPLE) {
        *out = PyList_AsTuple(items);
        Py_DECREF(items);
        return *out == NULL ? FAILED : OK;
    }
    if (status != OK) {
        Py_DECREF(items);
        return status;
    }
    *out = items;
    return OK;
}

/* Check a dict key as the Python DictUnslicer does, or hand back: it takes
   str and bytes keys and ints strictly within the hash modulus without
   counting their hashes while hash randomization is on.  With it off
   (PYTHONHASHSEED=0) a peer can choose str and bytes hashes, so the
   unslicer counts them (TRACKED_KEY_COST each, and the equality probes that
   equal full hashes cost): they are taken here only while no two keys of
   the dict share a full hash, and charged the same. */
/* The full hashes of a dict's tracked keys: the first few in place, then
   all of them in a set. */
#define FEW_KEYS 8
typedef struct {
    Py_hash_t few[FEW_KEYS];
    Py_ssize_t count;
    PyObject *set;
} Hashes;

/* Note `hash`; 1 if a key with the same full hash was seen, 0 if not, -1 on error. */
static int
seen_before(Hashes *hashes, Py_hash_t hash)
{
    PyObject *hash_obj;
    Py_ssize_t i;
    int present;

    if (hashes->set == NULL) {
        for (i = 0; i < hashes->count; i++) {
            if (hashes->few[i] == hash)
                return 1;
        }
        if (hashes->count < FEW_KEYS) {
            hashes->few[hashes->count++] = hash;
            return 0;
        }
        if ((hashes->set = PySet_New(NULL)) == NULL)
            return -1;
        for (i = 0; i < hashes->count; i++) {
            hash_obj = PyLong_FromSsize_t(hashes->few[i]);
            if (hash_obj == NULL || PySet_Add(hashes->set, hash_obj) < 0) {
                Py_XDECREF(hash_obj);
                return -1;
            }
            Py_DECREF(hash_obj);
        }
    }
    hash_obj = PyLong_FromSsize_t(hash);
    if (hash_obj == NULL)
        return -1;
    present = PySet_Contains(hashes->set, hash_obj);
    if (present == 0)
        present = PySet_Add(hashes->set, hash_obj) < 0 ? -1 : 0;
    Py_DECREF(hash_obj);
    return present;
}

static int
check_key(Parse *ps, PyObject *key, Hashes *hashes, unsigned long long *extra)
{
    Py_hash_t hash;
    int present;

    if (PyLong_CheckExact(key)) {
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (overflow || (value == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return HAND_BACK;
        }
        if (value < 0)
            return (unsigned long long)(-(value + 1)) < HASH_MODULUS - 1 ? OK : HAND_BACK;
        return (unsigned long long)value < HASH_MODULUS ? OK : HAND_BACK;
    }
    if (!PyUnicode_CheckExact(key) && !PyBytes_CheckExact(key))
        return HAND_BACK;
    if (ps->reader->plain_keys)
        return OK;
    hash = PyObject_Hash(key);
    if (hash == -1)
        return FAILED;
    present = seen_before(hashes, hash);
    if (present != 0)
        return present < 0 ? FAILED : HAND_BACK;
    *extra += ps->reader->tracked_key_cost;
    return OK;
}

static int
parse_dict(Parse *ps, unsigned long long depth, PyObject **out)
{
    PyObject *items = PyDict_New(), *key = NULL, *value = NULL;
    Hashes hashes;
    unsigned long long extra = 0;
    int status, closed;

    if (items == NULL)
        return FAILED;
    hashes.count = 0;
    hashes.set = NULL;
    for (;;) {
        status = at_close(ps, &closed);
        if (status != OK || closed)
            break;
        /* check_key takes no container: hand back before building one (and
           before running an unslicer of a nested type in it). */
        if ((ps->data[ps->pos] >> 4) == K_OPEN) {
            status = HAND_BACK;
            break;
        }
        status = parse_value(ps, depth, &key);
        if (status != OK)
            break;
        status = check_key(ps, key, &hashes, &extra);
        if (status == OK) {
            int present = PyDict_Contains(items, key);
            status = present < 0 ? FAILED : present ? HAND_BACK : OK;
        }
        if (status == OK && (unsigned long long)PyDict_GET_SIZE(items) >= ps->reader->max_items)
            status = HAND_BACK;
        if (status == OK)
            status = parse_value(ps, depth, &value);
        if (status == OK) {
            status = PyDict_SetItem(items, key, value) < 0 ? FAILED : OK;
            Py_DECREF(value);
        }
        Py_DECREF(key);
        if (status != OK)
            break;
    }
    Py_XDECREF(hashes.set);
    if (status == OK)
        status = charge(ps, C_DICT, PyDict_GET_SIZE(items), extra);
    if (status != OK) {
        Py_DECREF(items);
        return status;
    }
    *out = items;
    return OK;
}

/* A set's or frozenset's members, each checked as check_key checks a dict
   key (SetUnslicer checks members as DictUnslicer checks keys); a
   duplicate hands back, for Python to refuse.  The result is a copy, as
   SetUnslicer.finish makes one. */
static int
parse_set(Parse *ps, unsigned long long depth, int which, PyObject **out)
{
    PyObject *items = PySet_New(NULL), *member;
    Hashes hashes;
    unsigned long long extra = 0;
    Py_ssize_t size;
    int status, closed;

    if (items == NULL)
        return FAILED;
    hashes.count = 0;
    hashes.set = NULL;
    for (;;) {
        status = at_close(ps, &closed);
        if (status != OK || closed)
            break;
        size = PySet_GET_SIZE(items);
        if ((unsigned long long)size >= ps->reader->max_items || (ps->data[ps->pos] >> 4) == K_OPEN) {
            status = HAND_BACK; /* one too many, or a container (check_key takes none) */
            break;
        }
        status = parse_value(ps, depth, &member);
        if (status != OK)
            break;
        status = check_key(ps, member, &hashes, &extra);
        if (status == OK)
            status = PySet_Add(items, member) < 0 ? FAILED : PySet_GET_SIZE(items) == size ? HAND_BACK : OK;
        Py_DECREF(member);
        if (status != OK)
            break;
    }
    Py_XDECREF(hashes.set);
    if (status == OK)
        status = charge(ps, which, PySet_GET_SIZE(items), extra);
    if (status == OK) {
        *out = which == C_SET ? PySet_New(items) : PyFrozenSet_New(items);
        status = *out == NULL ? FAILED : OK;
    }
    Py_DECREF(items);
    return status;
}

/* ------------------------------------------------------------------------ */
/* RPC messages (framing/rpc/_wire.py's buildMessage is the reference)        */

static int called(PyObject *result);

/* What build_message says of a shape it leaves to the Python builder. */
#define OTHER_SHAPE 2
#define RPC_CALL 0
#define RPC_ANSWER 1
#define RPC_ARGS 5 /* where a CALL's arguments start (wire._ARGS) */

/* Whether `value` is an int (exactly) from 0 to 2**64 - 1, as a request or
   target id must be: 1 or 0, or -1 with an error set. */
static int
rpc_id(PyObject *value)
{
    if (!PyLong_CheckExact(value))
        return 0;
    if (PyLong_AsUnsignedLongLong(value) == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear(); /* negative, or 2**64 and beyond */
        return 0;
    }
    return 1;
}

/* A new `type` (a tuple subclass) holding the n references at `items`. */
static PyObject *
new_message(PyObject *type, PyObject *const *items, Py_ssize_t n)
{
    PyObject *message = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    Py_ssize_t i;
    if (message == NULL)
        return NULL;
    for (i = 0; i < n; i++)
        PyTuple_SET_ITEM(message, i, Py_NewRef(items[i]));
    return message;
}

/* The RPC message of `items` (a list of an rpc record's children) in the
   two commonest shapes, with buildMessage's checks written out as it writes
   them: an ANSWER, and a CALL without keyword arguments (handed on as
   (CALL, id, target, name, args, {})).  OK with *out set, HAND_BACK where
   buildMessage answers None (the Python unslicer then refuses it in its own
   words), OTHER_SHAPE for any other message (buildMessage builds it), or
   FAILED with an error set. */
static int
build_message(PyObject *items, PyObject *type, Py_ssize_t max_name, PyObject **out)
{
    Py_ssize_t count = PyList_GET_SIZE(items), length;
    PyObject *const *item = ((PyListObject *)items)->ob_item;
    PyObject *fields[6];
    long tag;
    int overflow, valid;

    if (count == 0 || !PyLong_CheckExact(item[0]))
        return OTHER_SHAPE;
    tag = PyLong_AsLongAndOverflow(item[0], &overflow);
    if (overflow || (tag == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return OTHER_SHAPE;
    }
    if (tag == RPC_ANSWER && count == 3) {
        valid = rpc_id(item[1]);
        if (valid <= 0)
            return valid < 0 ? FAILED : HAND_BACK;
        *out = new_message(type, item, 3);
        return *out == NULL ? FAILED : OK;
    }
    if (tag != RPC_CALL || count < RPC_ARGS || item[4] != Py_None)
        return OTHER_SHAPE;
    valid = rpc_id(item[1]);
    if (valid > 0)
        valid = rpc_id(item[2]);
    if (valid < 0)
        return FAILED;
    if (!valid || !PyUnicode_CheckExact(item[3]))
        return HAND_BACK;
    length = PyUnicode_GET_LENGTH(item[3]);
    if (length == 0 || length > max_name)
        return HAND_BACK;
    fields[0] = item[0];
    fields[1] = item[1];
    fields[2] = item[2];
    fields[3] = item[3];
    fields[4] = PyList_GetSlice(items, RPC_ARGS, count);
    if (fields[4] == NULL)
        return FAILED;
    Py_SETREF(fields[4], PyList_AsTuple(fields[4]));
    if (fields[4] == NULL)
        return FAILED;
    fields[5] = PyDict_New();
    if (fields[5] == NULL) {
        Py_DECREF(fields[4]);
        return FAILED;
    }
    *out = new_message(type, fields, 6);
    Py_DECREF(fields[4]);
    Py_DECREF(fields[5]);
    return *out == NULL ? FAILED : OK;
}

PyDoc_STRVAR(rpc_message_doc,
"rpc_message(items, message_type, max_name) -> message, None or NotImplemented\n\n"
"What the reader builds of an rpc record's children (a list): the message of\n"
"an ANSWER or of a CALL without keyword arguments, or None where\n"
"framing.rpc._wire.buildMessage answers None; NotImplemented for any other\n"
"shape, which the reader leaves to buildMessage (for tests: the two agree).");

static PyObject *
speedups_rpc_message(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *out = NULL;
    Py_ssize_t max_name;
    int status;

    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyType_Check(args[1]) ||
        !PyType_IsSubtype((PyTypeObject *)args[1], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "rpc_message(items: list, message_type: a tuple subclass, max_name: int)");
        return NULL;
    }
    max_name = PyLong_AsSsize_t(args[2]);
    if (max_name == -1 && PyErr_Occurred())
        return NULL;
    status = build_message(args[0], args[1], max_name, &out);
    if (status == FAILED)
        return NULL;
    if (status == HAND_BACK)
        Py_RETURN_NONE;
    if (status == OTHER_SHAPE)
        Py_RETURN_NOTIMPLEMENTED;
    return out;
}

/* A record's children, built by its Python builder; a builder that raises
   or answers None hands the object back to its Python unslicer. */
static int
parse_record(Parse *ps, unsigned long long depth, const Record *record, PyObject **out)
{
    PyObject *items;
    int status = parse_items(ps, depth, record->max_items, &items);

    if (status != OK)
        return status;
    status = charge_costs(ps, record->open_cost, record->item_cost, PyList_GET_SIZE(items), 0);
    if (status != OK) {
        Py_DECREF(items);
        return status;
    }
    if (record->message != NULL) {
        status = build_message(items, record->message, record->max_name, out);
        if (status != OTHER_SHAPE) {
            Py_DECREF(items);
            return status == FAILED ? called(NULL) : status; /* (as a builder that raised) */
        }
    }
    *out = PyObject_CallOneArg(record->build, items);
    Py_DECREF(items);
    if (*out == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return FAILED;
        PyErr_Clear();
        return HAND_BACK;
    }
    if (*out == Py_None) {
        Py_DECREF(*out);
        return HAND_BACK;
    }
    return OK;
}

/* Whether the bytes object `name` holds the `length` bytes at `data`. */
static int
same_name(PyObject *name, const unsigned char *data, unsigned long long length)
{
    return (unsigned long long)PyBytes_GET_SIZE(name) == length &&
           memcmp(PyBytes_AS_STRING(name), data, (size_t)length) == 0;
}

static const Record *
find_record(const Reader *reader, const unsigned char *name, unsigned long long length)
{
    Py_ssize_t i;
    for (i = 0; i < reader->record_count; i++)
        if (same_name(reader->records[i].name, name, length))
            return &reader->records[i];
    return NULL;
}

/* The names of the unslicer methods called (interned at import). */
static PyObject *str_check_token, *str_receive_child, *str_finish;

/* What a call into an unslicer returned: an Exception (a refusal, or a bug
   that Python refuses the object for) hands back, so that the Python
   decoder words it; anything else (KeyboardInterrupt, say) is raised. */
static int
called(PyObject *result)
{
    if (result != NULL)
        return OK;
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return FAILED;
    PyErr_Clear();
    return HAND_BACK;
}

static int
over_budget(const Parse *ps)
{
    return ps->items > ps->reader->max_object_items || ps->cost > ps->reader->max_object_memory;
}

/* The most a body of this kind may hold here, or 0 with *refused set for a
   token this reader leaves to Python wherever it is. */
static unsigned long long
body_limit(const Reader *reader, const Header *header, int *refused)
{
    *refused = 0;
    switch (header->kind) {
    case K_BYTES:
        return reader->max_bytes;
    case K_STRING:
        return reader->max_string;
    case K_OPEN:
        return reader->max_open_name;
    case K_FLOAT:
        *refused = header->value != 8;
        return 8;
    case K_BIGINT:
    case K_BIGNEG:
        return reader->max_bigint;
    case K_INT:
    case K_NEG:
    case K_CLOSE:
        return 0;
    case K_SIMPLE:
        *refused = header->value > 2;
        return 0;
    default:
        *refused = 1; /* ABORT, ERROR, PING, PONG */
        return 0;
    }
}

/* What lies_whole knows of each open container: a dict's next child is a
   key or a value; a set's children are all members (keys, as it were). */
enum { SKIM_OTHER = 0, SKIM_KEY = 1, SKIM_VALUE = 2, SKIM_MEMBER = 3 };

/* What the children of a container opened with this name are. */
static unsigned char
skim_expects(const unsigned char *name, unsigned long long length)
{
    if (length == 4 && memcmp(name, "dict", 4) == 0)
        return SKIM_KEY;
    if ((length == 3 && memcmp(name, "set", 3) == 0) || (length == 9 && memcmp(name, "frozenset", 9) == 0))
        return SKIM_MEMBER;
    return SKIM_OTHER;
}

/* Does the top-level object end inside the buffer, with no token in it that
   this reader leaves to Python whatever its value (a control token, a body
   over its limit, a container too deep, a container as a dict key or set
   member)?  Asked
   before the first Python unslicer runs, so that the usual hand-backs (an
   object cut by the end of the data, above all) never build a nested type
   twice. */
static int
lies_whole(Parse *ps)
{
    Parse skim = *ps;
    Header header;
    unsigned char expects[MAX_RECURSION + 1]; /* per open container, 1-based */
    unsigned long long open = 0, limit;
    int refused;

    skim.pos = ps->start;
    do {
        if (read_header(&skim, &header) != OK)
            return HAND_BACK;
        limit = body_limit(ps->reader, &header, &refused);
        if (refused)
            return HAND_BACK;
        if (header.kind == K_CLOSE) {
            if (header.value != 0 || open == 0)
                return HAND_BACK;
            open -= 1;
            continue;
        }
        if (open > 0 && expects[open] != SKIM_OTHER) {
            if (expects[open] != SKIM_VALUE && header.kind == K_OPEN)
                return HAND_BACK; /* check_key takes no container */
            if (expects[open] != SKIM_MEMBER)
                expects[open] = expects[open] == SKIM_KEY ? SKIM_VALUE : SKIM_KEY;
        }
        if (header.kind == K_INT || header.kind == K_NEG || header.kind == K_SIMPLE)
            continue;
        if (header.value > limit || header.value > (unsigned long long)(skim.end - skim.pos))
            return HAND_BACK;
        if (header.kind == K_OPEN) {
            if (open >= ps->reader->max_depth || open >= MAX_RECURSION)
                return HAND_BACK;
            open += 1;
            expects[open] = skim_expects(skim.data + skim.pos, header.value);
        }
        skim.pos += (size_t)header.value;
    } while (open > 0);
    ps->whole = 1;
    return OK;
}

/* Call unslicer.check_token(kind, length) for the header at ps->pos, as the
   Python decoder does for the body tokens of an unslicer that checks them:
   after the scanner's own limits (which hand back here), before the body. */
static int
check_child_header(Parse *ps, PyObject *unslicer)
{
    Header header;
    size_t at = ps->pos;
    unsigned long long limit;
    PyObject *args[3], *result;
    int status, refused;

    status = read_header(ps, &header);
    ps->pos = at;
    if (status != OK)
        return HAND_BACK;
    limit = body_limit(ps->reader, &header, &refused);
    if (refused)
        return HAND_BACK;
    if (header.kind == K_INT || header.kind == K_NEG || header.kind == K_SIMPLE)
        return OK; /* no body: no check */
    if (header.value > limit)
        return HAND_BACK; /* the scanner refuses it before any check */
    args[0] = unslicer;
    args[1] = PyLong_FromLong(header.kind);
    args[2] = PyLong_FromUnsignedLongLong(header.value);
    result = args[1] == NULL || args[2] == NULL ? NULL
             : PyObject_VectorcallMethod(str_check_token, args, 3, NULL);
    Py_XDECREF(args[1]);
    Py_XDECREF(args[2]);
    status = called(result);
    Py_XDECREF(result);
    return status;
}

/* Give one child to a nested type's unslicer, counted on its way in as
   ObjectBudget.receive_counted counts it. */
static int
give_child(Parse *ps, PyObject *unslicer, PyObject *child)
{
    PyObject *result;
    int status;

    ps->items += 1;
    ps->cost += ps->reader->child_cost;
    if (over_budget(ps))
        return HAND_BACK;
    result = PyObject_CallMethodOneArg(unslicer, str_receive_child, child);
    status = called(result);
    Py_XDECREF(result);
    return status;
}

/* Feed the children up to the CLOSE to a nested type's unslicer. */
static int
feed_children(Parse *ps, unsigned long long depth, const Nested *type, PyObject *unslicer)
{
    PyObject *child;
    int status, closed;

    for (;;) {
        status = at_close(ps, &closed);
        if (status != OK || closed)
            return status;
        if (type->checks_tokens && (status = check_child_header(ps, unslicer)) != OK)
            return status;
        status = parse_value(ps, depth, &child);
        if (status != OK)
            return status;
        status = give_child(ps, unslicer, child);
        Py_DECREF(child);
        if (status != OK)
            return status;
    }
}

/* A nested type's object, built by its Python unslicer from children built
   here; one that completes NOTHING is left to Python. */
static int
parse_nested(Parse *ps, unsigned long long depth, const Nested *type, PyObject **out)
{
    PyObject *unslicer;
    int status;

    if (!ps->whole && (status = lies_whole(ps)) != OK)
        return status;
    ps->cost += type->open_cost;
    if (over_budget(ps))
        return HAND_BACK;
    unslicer = PyObject_CallOneArg(type->factory, ps->reader->limits);
    if ((status = called(unslicer)) != OK)
        return status;
    status = feed_children(ps, depth, type, unslicer);
    if (status == OK) {
        *out = PyObject_CallMethodNoArgs(unslicer, str_finish);
        status = called(*out);
        if (status == OK && *out == ps->reader->nothing) {
            Py_DECREF(*out);
            status = HAND_BACK;
        }
    }
    Py_DECREF(unslicer);
    return status;
}

static const Nested *
find_nested(const Reader *reader, const unsigned char *name, unsigned long long length)
{
    Py_ssize_t i;
    for (i = 0; i < reader->nested_count; i++)
        if (same_name(reader->nested[i].name, name, length))
            return &reader->nested[i];
    return NULL;
}

static int
parse_open(Parse *ps, const Header *header, unsigned long long depth, PyObject **out)
{
    static const struct { const char *name; size_t length; } names[C_COUNT] = {
        {"list", 4}, {"tuple", 5}, {"dict", 4}, {"set", 3}, {"frozenset", 9}};
    const unsigned char *name;
    int which;

    if (take_body(ps, header, ps->reader->max_open_name, &name) != OK)
        return HAND_BACK;
    /* The Python decoder refuses an OPEN once max_depth containers are open. */
    if (depth >= ps->reader->max_depth || depth >= MAX_RECURSION)
        return HAND_BACK;
    for (which = 0; which < C_COUNT; which++) {
        if (header->value == names[which].length && memcmp(name, names[which].name, names[which].length) == 0)
            break;
    }
    if (which == C_COUNT) {
        const Record *record = find_record(ps->reader, name, header->value);
        const Nested *type;
        if (record != NULL)
            return parse_record(ps, depth + 1, record, out);
        type = find_nested(ps->reader, name, header->value);
        return type == NULL ? HAND_BACK : parse_nested(ps, depth + 1, type, out);
    }
    if (!ps->reader->builds[which])
        return HAND_BACK;
    if (which == C_DICT)
        return parse_dict(ps, depth + 1, out);
    if (which == C_SET || which == C_FROZENSET)
        return parse_set(ps, depth + 1, which, out);
    return parse_sequence(ps, depth + 1, which, out);
}

static int
parse_string(Parse *ps, const Header *header, PyObject **out)
{
    const unsigned char *body;
    if (take_body(ps, header, ps->reader->max_string, &body) != OK)
        return HAND_BACK;
    *out = PyUnicode_DecodeUTF8((const char *)body, (Py_ssize_t)header->value, NULL);
    if (*out != NULL)
        return OK;
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear(); /* the Python decoder refuses it, with the reason */
        return HAND_BACK;
    }
    return FAILED;
}

/* A BIGINT's or BIGNEG's value, if its magnitude (big-endian) is canonical
   as the Python decoder requires: beyond INT's or NEG's range, with no
   leading zero byte; anything else hands back, for Python to refuse. */
static int
parse_bigint(Parse *ps, const Header *header, PyObject **out)
{
    static const unsigned char two_to_64[9] = {1, 0, 0, 0, 0, 0, 0, 0, 0};
    const unsigned char *body;
    PyObject *magnitude;

    if (take_body(ps, header, ps->reader->max_bigint, &body) != OK)
        return HAND_BACK;
    if (header->value <= 8 || body[0] == 0)
        return HAND_BACK; /* below 2**64, or a leading zero byte */
    if (header->kind == K_BIGNEG && header->value == 9 && memcmp(body, two_to_64, 9) == 0)
        return HAND_BACK; /* -(2**64) is a NEG */
    magnitude = PyObject_CallMethod((PyObject *)&PyLong_Type, "from_bytes", "y#s", (const char *)body,
                                    (Py_ssize_t)header->value, "big");
    if (magnitude == NULL || header->kind == K_BIGINT) {
        *out = magnitude;
        return magnitude == NULL ? FAILED : OK;
    }
    *out = PyNumber_Negative(magnitude);
    Py_DECREF(magnitude);
    return *out == NULL ? FAILED : OK;
}

/* Parse one value (a scalar, or a whole container) at ps->pos, `depth`
   containers deep.  On OK *out is a new reference. */
static int
parse_value(Parse *ps, unsigned long long depth, PyObject **out)
{
    Header header;
    const unsigned char *body;

    if (read_header(ps, &header) != OK)
        return HAND_BACK;
    switch (header.kind) {
    case K_INT:
        *out = PyLong_FromUnsignedLongLong(header.value);
        break;
    case K_NEG:
        if (header.value <= (unsigned long long)LLONG_MAX) {
            *out = PyLong_FromLongLong(-1 - (long long)header.value);
        } else {
            PyObject *magnitude = PyLong_FromUnsignedLongLong(header.value);
            if (magnitude == NULL)
                return FAILED;
            *out = PyNumber_Invert(magnitude); /* -1 - value */
            Py_DECREF(magnitude);
        }
        break;
    case K_BYTES:
        if (take_body(ps, &header, ps->reader->max_bytes, &body) != OK)
            return HAND_BACK;
        *out = PyBytes_FromStringAndSize((const char *)body, (Py_ssize_t)header.value);
        break;
    case K_STRING:
        return parse_string(ps, &header, out);
    case K_BIGINT:
    case K_BIGNEG:
        return parse_bigint(ps, &header, out);
    case K_FLOAT:
        if (header.value != 8 || take_body(ps, &header, 8, &body) != OK)
            return HAND_BACK;
        *out = PyFloat_FromDouble(unpack_double(body));
        break;
    case K_SIMPLE:
        if (header.value > 2)
            return HAND_BACK;
        *out = header.value == 0 ? Py_None : header.value == 1 ? Py_False : Py_True;
        Py_INCREF(*out);
        return OK;
    case K_OPEN:
        return parse_open(ps, &header, depth, out);
    default:
        return HAND_BACK; /* CLOSE, ABORT, ERROR, PING, PONG */
    }
    return *out == NULL ? FAILED : OK;
}

/* Parse one top-level object at `pos` of `data`; OK with *out and *stop set. */
static int
parse_top(Reader *reader, const unsigned char *data, size_t pos, size_t end, PyObject **out, size_t *stop)
{
    Parse ps = {data, pos, end, reader, 0, 0, pos, 0, 0};
    int status = parse_value(&ps, 0, out);
    if (status == OK)
        *stop = ps.pos;
    reader->cut = status == HAND_BACK && ps.cut;
    return status;
}

static int
position_arg(PyObject *arg, Py_ssize_t length, size_t *pos)
{
    Py_ssize_t value = PyLong_AsSsize_t(arg);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value < 0 || value > length) {
        PyErr_SetString(PyExc_IndexError, "position outside the buffer");
        return -1;
    }
    *pos = (size_t)value;
    return 0;
}

PyDoc_STRVAR(reader_read_doc,
"read(buf, pos) -> int\n\n"
"Decode every whole top-level object of built-in kinds lying in buf from pos\n"
"on, appending each to the decoder's results, while the decoder is between\n"
"objects; return where it stopped (pos itself if it decoded nothing).");

static PyObject *
reader_read(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    const unsigned char *data;
    size_t pos, end, stop = 0;
    PyObject *obj;
    int status;

    self->cut = 0;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "read(buf, pos)");
        return NULL;
    }
    if (self->results == NULL || self->stack == NULL) {
        PyErr_SetString(PyExc_TypeError, "this reader has no decoder to read for");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]) || PyList_GET_SIZE(self->stack) != 0) {
        /* Another buffer type slices into its own type: left to Python. */
        Py_INCREF(args[1]);
        return args[1];
    }
    data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    end = (size_t)PyBytes_GET_SIZE(args[0]);
    if (position_arg(args[1], PyBytes_GET_SIZE(args[0]), &pos) < 0)
        return NULL;
    while (pos < end) {
        status = parse_top(self, data, pos, end, &obj, &stop);
        if (status == FAILED)
            return NULL;
        if (status == HAND_BACK)
            break;
        status = PyList_Append(self->results, obj);
        Py_DECREF(obj);
        if (status < 0)
            return NULL;
        pos = stop;
    }
    return PyLong_FromSize_t(pos);
}

PyDoc_STRVAR(reader_one_doc,
"one(buf, pos) -> (obj, end) or None\n\n"
"Decode the one top-level object at buf[pos]; None if it is not made of\n"
"built-in kinds lying whole in buf (the Python decoder then reads it).");

static PyObject *
reader_one(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    size_t pos, stop = 0;
    PyObject *obj, *result;
    int status;

    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "one(buf, pos)");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]))
        Py_RETURN_NONE;
    if (position_arg(args[1], PyBytes_GET_SIZE(args[0]), &pos) < 0)
        return NULL;
    status = parse_top(self, (const unsigned char *)PyBytes_AS_STRING(args[0]),
                       pos, (size_t)PyBytes_GET_SIZE(args[0]), &obj, &stop);
    if (status == FAILED)
        return NULL;
    if (status == HAND_BACK)
        Py_RETURN_NONE;
    result = Py_BuildValue("(Nn)", obj, (Py_ssize_t)stop);
    return result;
}

PyDoc_STRVAR(reader_add_frame_doc,
"add_frame(name, values) -> bool\n\n"
"Have frame() find frames of open type name (bytes) with `values` INTs\n"
"before their BYTES body; False (nothing learnt) past 4 types or 4 values,\n"
"or for a name known with another count (framing/_scanner.py FrameHeaders).");

static PyObject *
reader_add_frame(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *name;
    Py_ssize_t values, i;

    if (nargs != 2 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "add_frame(name: bytes, values: int)");
        return NULL;
    }
    name = args[0];
    values = PyLong_AsSsize_t(args[1]);
    if (values == -1 && PyErr_Occurred())
        return NULL;
    for (i = 0; i < self->frame_count; i++) {
        PyObject *known = self->frames[i].name;
        if (PyBytes_GET_SIZE(known) == PyBytes_GET_SIZE(name) &&
            memcmp(PyBytes_AS_STRING(known), PyBytes_AS_STRING(name), (size_t)PyBytes_GET_SIZE(name)) == 0)
            return PyBool_FromLong(self->frames[i].values == values);
    }
    if (self->frame_count >= MAX_FRAMES || values < 0 || values > MAX_FRAME_VALUES)
        Py_RETURN_FALSE;
    self->frames[self->frame_count].name = Py_NewRef(name);
    self->frames[self->frame_count].values = values;
    self->frame_count++;
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(reader_frame_doc,
"frame(buf, pos) -> (name, values, length, bytes_at, body_start) or None\n\n"
"The frame (add_frame) whose OPEN is at buf[pos]: its name, its INT values\n"
"(a tuple), its BYTES body's length, where that body's header and the body\n"
"begin; None unless all its headers lie whole in buf, each canonical and\n"
"within the limits, the name's and the body's lengths too (framing/_scanner.py\n"
"FrameHeaders finds exactly the same).");

static PyObject *
reader_frame(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    const unsigned char *data;
    size_t pos, end, bytes_at;
    const Frame *frame = NULL;
    unsigned long long values[MAX_FRAME_VALUES];
    Header header;
    Parse ps;
    PyObject *tuple = NULL, *result = NULL;
    Py_ssize_t i;

    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "frame(buf, pos)");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[0]))
        Py_RETURN_NONE;
    data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    end = (size_t)PyBytes_GET_SIZE(args[0]);
    if (position_arg(args[1], PyBytes_GET_SIZE(args[0]), &pos) < 0)
        return NULL;
    ps = (Parse){data, pos, end, self, 0, 0, pos, 0, 0};
    if (read_header(&ps, &header) != OK || header.kind != K_OPEN || header.value > self->max_open_name ||
        header.value > (unsigned long long)(end - ps.pos))
        Py_RETURN_NONE;
    for (i = 0; i < self->frame_count; i++) {
        PyObject *name = self->frames[i].name;
        if ((unsigned long long)PyBytes_GET_SIZE(name) == header.value &&
            memcmp(PyBytes_AS_STRING(name), data + ps.pos, (size_t)header.value) == 0) {
            frame = &self->frames[i];
            break;
        }
    }
    if (frame == NULL)
        Py_RETURN_NONE;
    ps.pos += (size_t)header.value;
    for (i = 0; i < frame->values; i++) {
        if (read_header(&ps, &header) != OK || header.kind != K_INT)
            Py_RETURN_NONE;
        values[i] = header.value;
    }
    bytes_at = ps.pos;
    if (read_header(&ps, &header) != OK || header.kind != K_BYTES || header.value > self->max_bytes)
        Py_RETURN_NONE;
    /* (name, values, length, bytes_at, body_start), built item by item (Py_BuildValue parses its format) */
    result = PyTuple_New(5);
    tuple = PyTuple_New(frame->values);
    if (result == NULL || tuple == NULL)
        goto fail;
    PyTuple_SET_ITEM(result, 1, tuple);
    for (i = 0; i < frame->values; i++) {
        PyObject *value = PyLong_FromUnsignedLongLong(values[i]);
        if (value == NULL)
            goto fail;
        PyTuple_SET_ITEM(tuple, i, value);
    }
    PyTuple_SET_ITEM(result, 0, Py_NewRef(frame->name));
    for (i = 2; i < 5; i++) {
        PyObject *value = i == 2 ? PyLong_FromUnsignedLongLong(header.value)
                                 : PyLong_FromSize_t(i == 3 ? bytes_at : ps.pos);
        if (value == NULL)
            goto fail;
        PyTuple_SET_ITEM(result, i, value);
    }
    return result;
fail:
    if (result == NULL)
        Py_XDECREF(tuple);
    Py_XDECREF(result);
    return NULL;
}

static int
limit_arg(PyObject *limits, Py_ssize_t index, unsigned long long *out)
{
    unsigned long long value = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(limits, index));
    if (value == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = value;
    return 0;
}

/* Take `records`: (name, build, open_cost, item_cost, extra_items) tuples. */
static int
set_records(Reader *self, PyObject *records)
{
    Py_ssize_t i;
    if (PyTuple_GET_SIZE(records) > MAX_RECORDS) {
        PyErr_SetString(PyExc_ValueError, "too many record types");
        return -1;
    }
    for (i = 0; i < PyTuple_GET_SIZE(records); i++) {
        PyObject *row = PyTuple_GET_ITEM(records, i);
        Record *record = &self->records[i];
        unsigned long long extra;
        PyObject *message = Py_None;
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 5 || PyTuple_GET_SIZE(row) > 6 ||
            !PyBytes_Check(PyTuple_GET_ITEM(row, 0)) || !PyCallable_Check(PyTuple_GET_ITEM(row, 1))) {
            PyErr_SetString(PyExc_TypeError,
                            "a record is (name: bytes, build, open_cost, item_cost, extra_items[, rpc])");
            return -1;
        }
        if (PyTuple_GET_SIZE(row) == 6)
            message = PyTuple_GET_ITEM(row, 5);
        if (message != Py_None) {
            /* rpc: (message_type, max_name), for an rpc message's record (framing/_core.py records) */
            if (!PyTuple_Check(message) || PyTuple_GET_SIZE(message) != 2 ||
                !PyType_Check(PyTuple_GET_ITEM(message, 0)) ||
                !PyType_IsSubtype((PyTypeObject *)PyTuple_GET_ITEM(message, 0), &PyTuple_Type)) {
                PyErr_SetString(PyExc_TypeError, "a record's rpc is (message_type: a tuple subclass, max_name: int)");
                return -1;
            }
            record->max_name = PyLong_AsSsize_t(PyTuple_GET_ITEM(message, 1));
            if (record->max_name == -1 && PyErr_Occurred())
                return -1;
        }
        if (limit_arg(row, 2, &record->open_cost) < 0 || limit_arg(row, 3, &record->item_cost) < 0 ||
            limit_arg(row, 4, &extra) < 0)
            return -1;
        if (record->open_cost > (1ULL << 32) || record->item_cost > (1ULL << 32) || extra > (1ULL << 32)) {
            PyErr_SetString(PyExc_ValueError, "implausible record cost");
            return -1;
        }
        /* saturating: max_items may be "no limit" (2**64 - 1) */
        record->max_items = self->max_items > ULLONG_MAX - extra ? ULLONG_MAX : self->max_items + extra;
        record->name = Py_NewRef(PyTuple_GET_ITEM(row, 0));
        record->build = Py_NewRef(PyTuple_GET_ITEM(row, 1));
        record->message = message == Py_None ? NULL : Py_NewRef(PyTuple_GET_ITEM(message, 0));
        self->record_count = i + 1;
    }
    return 0;
}

/* Take one row of `nested`: (name, factory, open_cost, checks_tokens). */
static int
set_nested_row(Nested *type, PyObject *row)
{
    int checks;
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4 || !PyBytes_Check(PyTuple_GET_ITEM(row, 0)) ||
        !PyCallable_Check(PyTuple_GET_ITEM(row, 1))) {
        PyErr_SetString(PyExc_TypeError, "a nested type is (name: bytes, factory, open_cost, checks_tokens)");
        return -1;
    }
    if (limit_arg(row, 2, &type->open_cost) < 0 || (checks = PyObject_IsTrue(PyTuple_GET_ITEM(row, 3))) < 0)
        return -1;
    if (type->open_cost > (1ULL << 32)) {
        PyErr_SetString(PyExc_ValueError, "implausible open cost");
        return -1;
    }
    type->checks_tokens = checks;
    type->name = Py_NewRef(PyTuple_GET_ITEM(row, 0));
    type->factory = Py_NewRef(PyTuple_GET_ITEM(row, 1));
    return 0;
}

/* Take `nested`: (limits, NOTHING, child_cost, rows). */
static int
set_nested(Reader *self, PyObject *nested)
{
    PyObject *rows;
    Py_ssize_t i;
    if (!PyTuple_Check(nested) || PyTuple_GET_SIZE(nested) != 4 || !PyTuple_Check(PyTuple_GET_ITEM(nested, 3))) {
        PyErr_SetString(PyExc_TypeError, "nested is (limits, NOTHING, child_cost, rows)");
        return -1;
    }
    rows = PyTuple_GET_ITEM(nested, 3);
    if (PyTuple_GET_SIZE(rows) > MAX_NESTED) {
        PyErr_SetString(PyExc_ValueError, "too many nested types");
        return -1;
    }
    if (limit_arg(nested, 2, &self->child_cost) < 0)
        return -1;
    if (self->child_cost > (1ULL << 32)) {
        PyErr_SetString(PyExc_ValueError, "implausible child cost");
        return -1;
    }
    self->limits = Py_NewRef(PyTuple_GET_ITEM(nested, 0));
    self->nothing = Py_NewRef(PyTuple_GET_ITEM(nested, 1));
    for (i = 0; i < PyTuple_GET_SIZE(rows); i++) {
        if (set_nested_row(&self->nested[i], PyTuple_GET_ITEM(rows, i)) < 0)
            return -1;
        self->nested_count = i + 1;
    }
    return 0;
}

static PyObject *
reader_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"limits", "builds", "costs", "plain_keys", "results", "stack", "records", "nested",
                               NULL};
    PyObject *limits, *builds, *costs, *results = Py_None, *stack = Py_None, *records = NULL, *nested = NULL;
    int plain_keys;
    Reader *self;
    unsigned long long *fields[9];
    Py_ssize_t i;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!p|OOO!O", keywords, &PyTuple_Type, &limits,
                                     &PyTuple_Type, &builds, &PyTuple_Type, &costs, &plain_keys, &results, &stack,
                                     &PyTuple_Type, &records, &nested))
        return NULL;
    if (PyTuple_GET_SIZE(limits) != 9 || PyTuple_GET_SIZE(builds) != C_COUNT || PyTuple_GET_SIZE(costs) != 2 * C_COUNT + 1) {
        PyErr_SetString(PyExc_ValueError, "limits: 9 ints; builds: 5 bools; costs: 11 ints");
        return NULL;
    }
    if ((results != Py_None && !PyList_CheckExact(results)) || (stack != Py_None && !PyList_CheckExact(stack))) {
        PyErr_SetString(PyExc_TypeError, "results and stack must be lists");
        return NULL;
    }
    self = (Reader *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    fields[0] = &self->max_header;
    fields[1] = &self->max_bytes;
    fields[2] = &self->max_string;
    fields[3] = &self->max_open_name;
    fields[4] = &self->max_depth;
    fields[5] = &self->max_items;
    fields[6] = &self->max_object_items;
    fields[7] = &self->max_object_memory;
    fields[8] = &self->max_bigint;
    for (i = 0; i < 9; i++) {
        if (limit_arg(limits, i, fields[i]) < 0)
            goto fail;
    }
    for (i = 0; i < C_COUNT; i++) {
        int truth = PyObject_IsTrue(PyTuple_GET_ITEM(builds, i));
        if (truth < 0)
            goto fail;
        self->builds[i] = truth;
        if (limit_arg(costs, 2 * i, &self->open_cost[i]) < 0 || limit_arg(costs, 2 * i + 1, &self->item_cost[i]) < 0)
            goto fail;
        if (self->open_cost[i] > (1ULL << 32) || self->item_cost[i] > (1ULL << 32)) {
            PyErr_SetString(PyExc_ValueError, "implausible container cost");
            goto fail;
        }
    }
    if (limit_arg(costs, 2 * C_COUNT, &self->tracked_key_cost) < 0)
        goto fail;
    if (self->tracked_key_cost > (1ULL << 32)) {
        PyErr_SetString(PyExc_ValueError, "implausible container cost");
        goto fail;
    }
    self->plain_keys = plain_keys;
    if (records != NULL && set_records(self, records) < 0)
        goto fail;
    if (nested != NULL && nested != Py_None && set_nested(self, nested) < 0)
        goto fail;
    if (results != Py_None) {
        Py_INCREF(results);
        self->results = results;
    }
    if (stack != Py_None) {
        Py_INCREF(stack);
        self->stack = stack;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static int
reader_traverse(Reader *self, visitproc visit, void *arg)
{
    Py_ssize_t i;
    Py_VISIT(self->results);
    Py_VISIT(self->stack);
    for (i = 0; i < self->record_count; i++) {
        Py_VISIT(self->records[i].build);
        Py_VISIT(self->records[i].message);
    }
    Py_VISIT(self->limits);
    Py_VISIT(self->nothing);
    for (i = 0; i < self->nested_count; i++)
        Py_VISIT(self->nested[i].factory);
    return 0;
}

static int
reader_clear(Reader *self)
{
    Py_ssize_t i;
    Py_CLEAR(self->results);
    Py_CLEAR(self->stack);
    for (i = 0; i < self->record_count; i++) {
        Py_CLEAR(self->records[i].name);
        Py_CLEAR(self->records[i].build);
        Py_CLEAR(self->records[i].message);
    }
    self->record_count = 0;
    Py_CLEAR(self->limits);
    Py_CLEAR(self->nothing);
    for (i = 0; i < self->nested_count; i++) {
        Py_CLEAR(self->nested[i].name);
        Py_CLEAR(self->nested[i].factory);
    }
    self->nested_count = 0;
    for (i = 0; i < self->frame_count; i++)
        Py_CLEAR(self->frames[i].name);
    self->frame_count = 0;
    return 0;
}

static void
reader_dealloc(Reader *self)
{
    PyObject_GC_UnTrack(self);
    reader_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef reader_members[] = {
    {"cut", T_INT, offsetof(Reader, cut), READONLY,
     "Whether the last read stopped at an object that its buffer cut short, and\n"
     "for nothing else: every token up to the buffer's end is one this reader\n"
     "takes, so the pure decoder would only have begun the object (the scanner\n"
     "may hold those bytes back and offer them again joined to the next chunk)."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef reader_methods[] = {
    {"read", (PyCFunction)(void (*)(void))reader_read, METH_FASTCALL, reader_read_doc},
    {"one", (PyCFunction)(void (*)(void))reader_one, METH_FASTCALL, reader_one_doc},
    {"add_frame", (PyCFunction)(void (*)(void))reader_add_frame, METH_FASTCALL, reader_add_frame_doc},
    {"frame", (PyCFunction)(void (*)(void))reader_frame, METH_FASTCALL, reader_frame_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(reader_doc,
"Reader(limits, builds, costs, plain_keys, results=None, stack=None, records=(), nested=None)\n\n"
"Decodes top-level objects of built-in kinds for one decoder's limits and\n"
"registry (see framing/_core.py for the arguments).");

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framing._speedups.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = reader_doc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_methods = reader_methods,
    .tp_members = reader_members,
    .tp_new = reader_new,
};

/* ------------------------------------------------------------------------ */
/* The encoder                                                               */

typedef struct {
    unsigned char *data;
    size_t length;
    size_t capacity;
    unsigned char small[512];
} Output;

static void
output_start(Output *out)
{
    out->data = out->small;
    out->length = 0;
    out->capacity = sizeof out->small;
}

/* What an encode call returns for its status (bytes, None to hand back, or
   NULL with an exception set), freeing the output either way. */
static PyObject *
output_finish(Output *out, int status)
{
    PyObject *result = NULL;

    if (status == OK)
        result = PyBytes_FromStringAndSize((const char *)out->data, (Py_ssize_t)out->length);
    else if (status == HAND_BACK)
        result = Py_NewRef(Py_None);
    if (out->data != out->small)
        PyMem_Free(out->data);
    return result;
}

static int
reserve(Output *out, size_t more)
{
    size_t wanted, capacity;
    unsigned char *grown;

    if (more <= out->capacity - out->length)
        return 0;
    if (more > (size_t)PY_SSIZE_T_MAX - out->length) {
        PyErr_NoMemory();
        return -1;
    }
    wanted = out->length + more;
    capacity = out->capacity;
    while (capacity < wanted)
        capacity = capacity > (size_t)PY_SSIZE_T_MAX / 2 ? wanted : capacity * 2;
    if (out->data == out->small) {
        grown = PyMem_Malloc(capacity);
        if (grown != NULL)
            memcpy(grown, out->small, out->length);
    } else {
        grown = PyMem_Realloc(out->data, capacity);
    }
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->data = grown;
    out->capacity = capacity;
    return 0;
}

static int
write_bytes(Output *out, const void *data, size_t length)
{
    if (reserve(out, length) < 0)
        return -1;
    memcpy(out->data + out->length, data, length);
    out->length += length;
    return 0;
}

/* The canonical header (framing.wire.encode_header). */
static int
write_header(Output *out, int kind, unsigned long long value)
{
    unsigned char header[9];
    size_t width, i;
    unsigned char code;

    if (value < INLINE_LIMIT) {
        header[0] = (unsigned char)((kind << 4) | (int)value);
        return write_bytes(out, header, 1);
    }
    if (value < (1ULL << 8)) {
        width = 1, code = 12;
    } else if (value < (1ULL << 16)) {
        width = 2, code = 13;
    } else if (value < (1ULL << 32)) {
        width = 4, code = 14;
    } else {
        width = 8, code = 15;
    }
    header[0] = (unsigned char)((kind << 4) | code);
    for (i = 0; i < width; i++)
        header[width - i] = (unsigned char)(value >> (8 * i));
    return write_bytes(out, header, width + 1);
}

static int write_value(Output *out, PyObject *obj, unsigned long long depth, unsigned long long max_depth);

static int
write_int(Output *out, PyObject *obj)
{
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (value == -1 && PyErr_Occurred())
        return FAILED;
    if (overflow > 0) {
        unsigned long long big = PyLong_AsUnsignedLongLong(obj);
        if (big == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return FAILED;
            PyErr_Clear();
            return HAND_BACK; /* a BIGINT */
        }
        return write_header(out, K_INT, big) < 0 ? FAILED : OK;
    }
    if (overflow < 0)
        return HAND_BACK; /* below -(2**63): NEG or BIGNEG, left to Python */
    if (value >= 0)
        return write_header(out, K_INT, (unsigned long long)value) < 0 ? FAILED : OK;
    return write_header(out, K_NEG, (unsigned long long)(-(value + 1))) < 0 ? FAILED : OK;
}

static int
write_float(Output *out, PyObject *obj)
{
    double value = PyFloat_AS_DOUBLE(obj);
    uint64_t bits;
    unsigned char body[9];
    int i;
    memcpy(&bits, &value, sizeof bits);
    body[0] = (unsigned char)((K_FLOAT << 4) | 8);
    for (i = 0; i < 8; i++)
        body[8 - i] = (unsigned char)(bits >> (8 * i));
    return write_bytes(out, body, 9) < 0 ? FAILED : OK;
}

static int
write_body(Output *out, int kind, const char *data, Py_ssize_t length)
{
    if (write_header(out, kind, (unsigned long long)length) < 0 || write_bytes(out, data, (size_t)length) < 0)
        return FAILED;
    return OK;
}

static int
write_str(Output *out, PyObject *obj)
{
    PyObject *encoded;
    int status;
    if (PyUnicode_IS_COMPACT_ASCII(obj))
        return write_body(out, K_STRING, (const char *)PyUnicode_DATA(obj), PyUnicode_GET_LENGTH(obj));
    /* Not PyUnicode_AsUTF8AndSize: that keeps a UTF-8 copy in the str. */
    encoded = PyUnicode_AsUTF8String(obj);
    if (encoded == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return FAILED;
        PyErr_Clear(); /* a lone surrogate: Python says so */
        return HAND_BACK;
    }
    status = write_body(out, K_STRING, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded));
    Py_DECREF(encoded);
    return status;
}

static int
write_container(Output *out, PyObject *obj, unsigned long long depth, unsigned long long max_depth)
{
    static const unsigned char open_list[] = {0x74, 'l', 'i', 's', 't'};
    static const unsigned char open_tuple[] = {0x75, 't', 'u', 'p', 'l', 'e'};
    static const unsigned char open_dict[] = {0x74, 'd', 'i', 'c', 't'};
    static const unsigned char close = K_CLOSE << 4;
    Py_ssize_t i, position = 0;
    PyObject *key, *value;
    int status = OK;

    depth += 1;
    if (depth > max_depth || depth > MAX_RECURSION)
        return HAND_BACK; /* too deep, or a cycle: Python says which */
    if (PyDict_CheckExact(obj)) {
        if (write_bytes(out, open_dict, sizeof open_dict) < 0)
            return FAILED;
        while (status == OK && PyDict_Next(obj, &position, &key, &value)) {
            /* Borrowed references that writing may outlive (a str's encode
               runs no Python code, but hold them anyway). */
            Py_INCREF(key);
            Py_INCREF(value);
            status = write_value(out, key, depth, max_depth);
            if (status == OK)
                status = write_value(out, value, depth, max_depth);
            Py_DECREF(key);
            Py_DECREF(value);
        }
    } else if (PyList_CheckExact(obj)) {
        if (write_bytes(out, open_list, sizeof open_list) < 0)
            return FAILED;
        /* The list is re-read at each step: its length may not change
           (no Python code runs), but index defensively. */
        for (i = 0; status == OK && i < PyList_GET_SIZE(obj); i++) {
            PyObject *item = PyList_GET_ITEM(obj, i);
            Py_INCREF(item);
            status = write_value(out, item, depth, max_depth);
            Py_DECREF(item);
        }
    } else {
        if (write_bytes(out, open_tuple, sizeof open_tuple) < 0)
            return FAILED;
        for (i = 0; status == OK && i < PyTuple_GET_SIZE(obj); i++)
            status = write_value(out, PyTuple_GET_ITEM(obj, i), depth, max_depth);
    }
    if (status != OK)
        return status;
    return write_bytes(out, &close, 1) < 0 ? FAILED : OK;
}

/* Write one value of an exact built-in type; HAND_BACK for anything else. */
static int
write_value(Output *out, PyObject *obj, unsigned long long depth, unsigned long long max_depth)
{
    static const unsigned char simple_none = (K_SIMPLE << 4) | 0;
    static const unsigned char simple_false = (K_SIMPLE << 4) | 1;
    static const unsigned char simple_true = (K_SIMPLE << 4) | 2;
    PyTypeObject *type = Py_TYPE(obj);

    if (type == &PyLong_Type)
        return write_int(out, obj);
    if (type == &PyUnicode_Type)
        return write_str(out, obj);
    if (type == &PyFloat_Type)
        return write_float(out, obj);
    if (type == &PyBytes_Type) {
        if (PyBytes_GET_SIZE(obj) >= LARGE_PIECE)
            return HAND_BACK; /* kept by reference by the Python encoder */
        return write_body(out, K_BYTES, PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj));
    }
    if (obj == Py_None || obj == Py_True || obj == Py_False) {
        const unsigned char *token = obj == Py_None ? &simple_none : obj == Py_True ? &simple_true : &simple_false;
        return write_bytes(out, token, 1) < 0 ? FAILED : OK;
    }
    if (type == &PyList_Type || type == &PyTuple_Type || type == &PyDict_Type)
        return write_container(out, obj, depth, max_depth);
    return HAND_BACK;
}

PyDoc_STRVAR(encode_doc,
"encode(obj, max_depth, prefix=b'') -> bytes or None\n\n"
"The tokens of obj after prefix, if obj is made only of exact built-in types\n"
"(int within 64 bits, float, str, bytes under 32 KiB, bool, None, list,\n"
"tuple, dict) nested at most max_depth deep; else None.");

static PyObject *
speedups_encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Output out;
    unsigned long long max_depth;
    int status;

    if (nargs < 2 || nargs > 3 || (nargs == 3 && !PyBytes_CheckExact(args[2]))) {
        PyErr_SetString(PyExc_TypeError, "encode(obj, max_depth, prefix=b'')");
        return NULL;
    }
    max_depth = PyLong_AsUnsignedLongLong(args[1]);
    if (max_depth == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    output_start(&out);
    status = OK;
    if (nargs == 3 && write_bytes(&out, PyBytes_AS_STRING(args[2]), (size_t)PyBytes_GET_SIZE(args[2])) < 0)
        status = FAILED;
    if (status == OK)
        status = write_value(&out, args[0], 0, max_depth);
    return output_finish(&out, status);
}

PyDoc_STRVAR(encode_parts_doc,
"encode_parts(parts, max_depth, opening) -> bytes or None\n\n"
"opening (an OPEN token), the tokens of each of parts (a list or tuple,\n"
"iterated as one), then CLOSE: a container written by a slicer, at the depth where\n"
"max_depth is what is left; None if any part is not as encode() takes it.");

static PyObject *
speedups_encode_parts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static const unsigned char close = K_CLOSE << 4;
    Output out;
    unsigned long long max_depth;
    PyObject *parts;
    Py_ssize_t i;
    int status = OK;

    if (nargs != 3 || !PyBytes_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "encode_parts(parts, max_depth, opening)");
        return NULL;
    }
    parts = args[0];
    /* A subclass too (an RPC Message is a tuple), if iterating it is the
       base type's iteration, which is all the Python encoder does with it. */
    if (!(PyList_Check(parts) && Py_TYPE(parts)->tp_iter == PyList_Type.tp_iter) &&
        !(PyTuple_Check(parts) && Py_TYPE(parts)->tp_iter == PyTuple_Type.tp_iter))
        Py_RETURN_NONE;
    max_depth = PyLong_AsUnsignedLongLong(args[1]);
    if (max_depth == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (max_depth < 1)
        Py_RETURN_NONE; /* the container itself is too deep: Python says so */
    output_start(&out);
    if (write_bytes(&out, PyBytes_AS_STRING(args[2]), (size_t)PyBytes_GET_SIZE(args[2])) < 0)
        status = FAILED;
    for (i = 0; status == OK && i < Py_SIZE(parts); i++) {
        PyObject *item = PyList_Check(parts) ? PyList_GET_ITEM(parts, i) : PyTuple_GET_ITEM(parts, i);
        Py_INCREF(item);
        status = write_value(&out, item, 1, max_depth);
        Py_DECREF(item);
    }
    if (status == OK && write_bytes(&out, &close, 1) < 0)
        status = FAILED;
    return output_finish(&out, status);
}

/* ------------------------------------------------------------------------ */
/* The scanner's WholeBody (framing/_scanner.py's WholeBody is the reference) */

/* A whole body's first buffer, or less if it is shorter (scanner._FIRST_CAPACITY). */
#define FIRST_CAPACITY (64 * 1024)

typedef struct {
    PyObject_HEAD
    PyObject *buffer;        /* a bytes object only this owns, filled up to used; or NULL */
    Py_ssize_t length;       /* the body's announced length */
    Py_ssize_t capacity;     /* the buffer's size: used <= capacity <= length */
    Py_ssize_t used;
    Py_ssize_t remaining;    /* length - used while a body is collected; 0 between bodies */
} WholeBody;

static void
wholebody_empty(WholeBody *self)
{
    Py_CLEAR(self->buffer);
    self->length = self->capacity = self->used = self->remaining = 0;
}

static void
wholebody_dealloc(WholeBody *self)
{
    Py_CLEAR(self->buffer);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
wholebody_start(WholeBody *self, PyObject *arg)
{
    Py_ssize_t length = PyLong_AsSsize_t(arg);
    if (length == -1 && PyErr_Occurred())
        return NULL;
    if (length < 0) {
        PyErr_SetString(PyExc_ValueError, "a body's length is not negative");
        return NULL;
    }
    wholebody_empty(self);
    self->length = self->remaining = length;
    Py_RETURN_NONE;
}

/* Copy size bytes in; the caller has checked that size <= remaining, so
 * used + size <= length and nothing is written past the buffer. */
static int
wholebody_copy(WholeBody *self, const char *data, Py_ssize_t size)
{
    Py_ssize_t end = self->used + size;
    if (size == 0)
        return 0;  /* (and no buffer is made: an empty body's value is b"") */
    if (end > self->capacity) {
        /* Doubling, up to the length: never over twice what arrived.  The
         * new bytes are not zeroed: each is written before it is read. */
        Py_ssize_t capacity = self->capacity > self->length / 2 ? self->length : 2 * self->capacity;
        if (capacity < end)
            capacity = end;
        if (capacity < FIRST_CAPACITY)
            capacity = FIRST_CAPACITY < self->length ? FIRST_CAPACITY : self->length;
        if (self->buffer == NULL) {
            self->buffer = PyBytes_FromStringAndSize(NULL, capacity);
            if (self->buffer == NULL)
                return -1;
        }
        else if (_PyBytes_Resize(&self->buffer, capacity) < 0) {
            /* (the buffer is gone: the body cannot be completed) */
            self->length = self->capacity = self->used = self->remaining = 0;
            return -1;
        }
        self->capacity = capacity;
    }
    memcpy(PyBytes_AS_STRING(self->buffer) + self->used, data, (size_t)size);
    self->used = end;
    self->remaining -= size;
    return 0;
}

static PyObject *
wholebody_take(WholeBody *self, PyObject *data)
{
    Py_buffer view;
    int status;
    if (PyBytes_CheckExact(data)) {
        /* the common case: a read off the socket */
        if (PyBytes_GET_SIZE(data) >= self->remaining)
            Py_RETURN_FALSE;
        if (wholebody_copy(self, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data)) < 0)
            return NULL;
        Py_RETURN_TRUE;
    }
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (view.len >= self->remaining) {
        PyBuffer_Release(&view);
        Py_RETURN_FALSE;
    }
    status = wholebody_copy(self, view.buf, view.len);
    PyBuffer_Release(&view);
    if (status < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
wholebody_write(WholeBody *self, PyObject *data)
{
    Py_buffer view;
    int status;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (view.len > self->remaining) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "%zd bytes written where %zd remain of the body", view.len, self->remaining);
        return NULL;
    }
    status = wholebody_copy(self, view.buf, view.len);
    PyBuffer_Release(&view);
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
wholebody_held(WholeBody *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(self->used);
}

static PyObject *
wholebody_value(WholeBody *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *value = self->buffer;
    if (value == NULL)
        value = PyBytes_FromStringAndSize(NULL, 0);
    else if (self->used < self->capacity && _PyBytes_Resize(&value, self->used) < 0) {
        self->buffer = NULL;
        wholebody_empty(self);
        return NULL;
    }
    self->buffer = NULL;
    wholebody_empty(self);
    return value;
}

static PyObject *
wholebody_abandon(WholeBody *self, PyObject *Py_UNUSED(ignored))
{
    self->remaining = 0;
    Py_RETURN_NONE;
}

static PyObject *
wholebody_drop(WholeBody *self, PyObject *Py_UNUSED(ignored))
{
    wholebody_empty(self);
    Py_RETURN_NONE;
}

static PyMemberDef wholebody_members[] = {
    {"remaining", T_PYSSIZET, offsetof(WholeBody, remaining), READONLY,
     "Bytes of the body still to come (0 between bodies)."},
    {"capacity", T_PYSSIZET, offsetof(WholeBody, capacity), READONLY,
     "Bytes the buffer holds room for."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef wholebody_methods[] = {
    {"start", (PyCFunction)wholebody_start, METH_O, "start(length): begin a body of length bytes."},
    {"take", (PyCFunction)wholebody_take, METH_O,
     "take(data) -> bool: copy data in if it is all body and ends none of it;\n"
     "else take nothing and return False."},
    {"write", (PyCFunction)wholebody_write, METH_O, "write(data): copy in data, at most remaining bytes."},
    {"held", (PyCFunction)wholebody_held, METH_NOARGS, "held() -> int: bytes of the body that have arrived."},
    {"value", (PyCFunction)wholebody_value, METH_NOARGS,
     "value() -> bytes: the body; the buffer is emptied for the next body."},
    {"abandon", (PyCFunction)wholebody_abandon, METH_NOARGS,
     "abandon(): expect no more of this body; take takes nothing from now on."},
    {"drop", (PyCFunction)wholebody_drop, METH_NOARGS,
     "drop(): let go of what arrived of the body, and expect no more of it."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WholeBodyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framing._speedups.WholeBody",
    .tp_basicsize = sizeof(WholeBody),
    .tp_dealloc = (destructor)wholebody_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "WholeBody(): collects a whole body to hand out as one bytes, copying\n"
              "each byte once (framing/_scanner.py's WholeBody, compiled).",
    .tp_methods = wholebody_methods,
    .tp_members = wholebody_members,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------ */

static PyMethodDef speedups_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))speedups_encode, METH_FASTCALL, encode_doc},
    {"encode_parts", (PyCFunction)(void (*)(void))speedups_encode_parts, METH_FASTCALL, encode_parts_doc},
    {"rpc_message", (PyCFunction)(void (*)(void))speedups_rpc_message, METH_FASTCALL, rpc_message_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "framing._speedups",
    .m_doc = "The compiled fast path of chunkwire's codec core (see framing/_core.py).",
    .m_size = -1,
    .m_methods = speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *module;
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    if (PyType_Ready(&WholeBodyType) < 0)
        return NULL;
    str_check_token = PyUnicode_InternFromString("check_token");
    str_receive_child = PyUnicode_InternFromString("receive_child");
    str_finish = PyUnicode_InternFromString("finish");
    if (str_check_token == NULL || str_receive_child == NULL || str_finish == NULL)
        return NULL;
    module = PyModule_Create(&speedups_module);
    if (module == NULL)
        return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(module, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&WholeBodyType);
    if (PyModule_AddObject(module, "WholeBody", (PyObject *)&WholeBodyType) < 0) {
        Py_DECREF(&WholeBodyType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
