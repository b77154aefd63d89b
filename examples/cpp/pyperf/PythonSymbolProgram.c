/* The naming half of PyPerf's Python walk: a frame's code object -> a symbol
 * id. The loader appends this file to PyPerfBPFProgram.c, whose maps, per-CPU
 * state and read helpers it uses, and PythonStackWalkProgram.c, which calls
 * code_symbol for each frame, after it (PyPerfBpf.cc, PyPerfBpfProgramText).
 *
 *   code_symbol    a code object seen before: its code_symbols entry, checked
 *                  against the code object's name and file objects (their
 *                  cached hash or bytes) and first line, and against the
 *                  symbol id still holding its symbol; else intern_symbol,
 *                  and the entry (re)made
 *   intern_symbol  the code object's file, name, class (of a self or cls
 *                  first argument) and first line, copied, then looked up or
 *                  added in the symbols maps */

/* PEP 393 state bits of PyASCIIObject.state in GIL and 3.13t builds, checked
 * against each interpreter's headers by tests/cc/test_py_offsets.cc. */
#define UNICODE_KIND_SHIFT 2
#define UNICODE_COMPACT_BIT 5
#define UNICODE_ASCII_BIT 6
/* More characters than any name or path: a larger length is corrupt memory. */
#define MAX_TEXT_LENGTH (1u << 24)

/* A str's length and cached hash (-1: not computed yet) are adjacent in every
 * CPython (PyASCIIObject.length, .hash; 2.7 PyStringObject.ob_size, .ob_shash),
 * and in 3.x the PEP 393 state follows: one read gets all three. */
struct py_text_header {
  u64 length;
  s64 hash;
  u32 state;
  u32 pad;
};

/* Copies the raw bytes of a Python string object (a 2.7 str or a 3.x PEP 393
 * str) into dst, at most cap bytes (a multiple of 4, so a cut falls between
 * characters), and describes them in *text. User space decodes the bytes.
 * Returns the string's cached hash (-1 if it has none or was not read). With
 * hash_only, a string that has a hash is not copied: its hash stands for its
 * text (text->encoding is then PYPERF_TEXT_NONE); one that has none is
 * copied into dst zero-filled first (for text_print). */
static __always_inline s64 read_py_text(struct pyperf_offsets *o, u64 obj, char *dst, u32 cap,
                                        struct pyperf_text *text, int hash_only) {
  text->encoding = PYPERF_TEXT_NONE;
  text->size = 0;
  if (obj == 0) return -1;
  text->encoding = PYPERF_TEXT_UNREADABLE;
  struct py_text_header h = {};
  int unicode = o->string_kind == PYPERF_STRING_UNICODE;
  int state_follows = unicode && o->unicode_state == o->unicode_length + 16;
  u32 header = state_follows ? sizeof(h) : 16;
  if (read_user(&h, header, (void *)(obj + o->unicode_length)) != 0) return -1;
  if (hash_only) {
    if (h.hash != -1) {
      text->encoding = PYPERF_TEXT_NONE;
      return h.hash;
    }
    __builtin_memset(dst, 0, cap);
  }
  if (h.length > MAX_TEXT_LENGTH) return h.hash;
  u64 data = obj + o->string_data;
  u8 encoding = PYPERF_TEXT_UTF8;
  u64 width = 1;
  if (unicode) {
    u32 state = h.state;
    if (!state_follows && read_user(&state, sizeof(state), (void *)(obj + o->unicode_state)) != 0)
      return h.hash;
    u32 kind = (state >> UNICODE_KIND_SHIFT) & 7;
    if (kind != 1 && kind != 2 && kind != 4) return h.hash;
    if (!((state >> UNICODE_COMPACT_BIT) & 1)) {
      /* A legacy string: its characters are elsewhere (PyUnicodeObject.data). */
      data = read_ptr(obj + o->compact_unicode_data);
      if (data == 0) return h.hash;
    } else if (!((state >> UNICODE_ASCII_BIT) & 1)) {
      data = obj + o->compact_unicode_data;
    }
    encoding = kind;
    width = kind;
  }
  /* 64-bit throughout: a 32-bit copy of the size would lose the bound the
   * verifier needs on the read's length. */
  u64 size = h.length * width;
  u64 n = size;
  if (n > cap) n = cap;
  if (n > 0 && read_user(dst, n, (void *)data) != 0) return h.hash;
  text->size = (u32)size;
  text->encoding = encoding;
  return h.hash;
}

#define PRINT_MULTIPLIER 0x9E3779B97F4A7C15ull

static __always_inline u64 mix_print(u64 h, u64 word) {
  h = (h ^ word) * PRINT_MULTIPLIER;
  return h ^ (h >> 31);
}

/* What stands for a string's text in a code_symbols entry: its cached hash
 * when it has one (equal texts have equal hashes; unequal ones, one chance in
 * 2^64), else the bytes the symbol holds, with their full size and encoding.
 * `bytes` is zero past the text (cap bytes in all, a multiple of 8): every
 * word is mixed, with no branch for the verifier to follow per word. Never
 * 0, which says "cannot be checked" (an unreadable string): a frame with one
 * is never named from the cache. */
static __always_inline u64 text_print(s64 hash, struct pyperf_text *text, u8 *bytes, u32 cap) {
  if (hash != -1) return mix_print(1, (u64)hash) | 1;
  if (text->encoding == PYPERF_TEXT_UNREADABLE) return 0;
  if (text->encoding == PYPERF_TEXT_NONE) return 2; /* no string object */
  u64 h = mix_print(3, ((u64)text->size << 8) | text->encoding);
  u64 *words = (u64 *)bytes;
#pragma unroll
  for (u32 i = 0; i < cap / 8; i++) h = mix_print(h, words[i]);
  return h | 1;
}

/* A class's tp_name (a C string in UTF-8), as a symbol holds it: at most
 * PYPERF_CLASS_LEN - 1 bytes and a terminator in dst (zero-filled after it),
 * and a size above that when the name was cut. */
static __always_inline void read_class_text(u64 type, struct pyperf_offsets *o, char *dst,
                                            struct pyperf_text *text) {
  __builtin_memset(dst, 0, PYPERF_CLASS_LEN);
  text->encoding = PYPERF_TEXT_NONE;
  text->size = 0;
  u64 tp_name = read_ptr(type + o->type_name);
  if (tp_name == 0) return;
  text->encoding = PYPERF_TEXT_UNREADABLE;
  long copied = read_user_str(dst, PYPERF_CLASS_LEN, (void *)tp_name);
  if (copied <= 0) return;
  text->encoding = PYPERF_TEXT_UTF8;
  text->size = (u32)copied - 1;
  if (copied == PYPERF_CLASS_LEN) {
    /* The buffer is full: the name was cut unless it ends right there. The
     * last byte copied is the terminator, so size counts one byte less than
     * the buffer; a larger size marks the cut. */
    char next = 0;
    read_user(&next, 1, (void *)(tp_name + PYPERF_CLASS_LEN - 1));
    if (next != 0) text->size = PYPERF_CLASS_LEN + 1;
  }
}

/* The class a frame of a method runs for: the type of its first argument
 * (self), or the argument itself (cls); 0 if there is none. */
static __always_inline u64 frame_class(struct pyperf_sample_state *state, struct pyperf_offsets *o,
                                       u64 frame, u8 arg_kind) {
  u64 arg0 = FRAME_PTR(state, frame, o->frame_localsplus) & ~(u64)o->stackref_tag_bits;
  if (arg0 == 0) return 0;
  return arg_kind == PYPERF_ARG_SELF ? read_ptr(arg0 + o->object_type) : arg0;
}

/* Where the class of a method comes from: a first argument named self or cls. */
static __always_inline u8 code_arg_kind(struct pyperf_offsets *o, u64 code) {
  s32 argcount = read_s32(code + o->code_argcount);
  if (argcount <= 0) return PYPERF_ARG_NONE;
  u64 names = read_ptr(code + o->code_varnames);
  if (names == 0) return PYPERF_ARG_NONE;
  u64 first = read_ptr(names + o->tuple_items);
  char arg[8] = {};
  struct pyperf_text arg_text = {};
  read_py_text(o, first, arg, sizeof(arg), &arg_text, 0);
  /* "self" and "cls" are ASCII: one byte per character in every encoding. */
  if (arg_text.encoding != PYPERF_TEXT_LATIN1 && arg_text.encoding != PYPERF_TEXT_UTF8)
    return PYPERF_ARG_NONE;
  if (arg_text.size == 4 && arg[0] == 's' && arg[1] == 'e' && arg[2] == 'l' && arg[3] == 'f')
    return PYPERF_ARG_SELF;
  if (arg_text.size == 3 && arg[0] == 'c' && arg[1] == 'l' && arg[2] == 's')
    return PYPERF_ARG_CLS;
  return PYPERF_ARG_NONE;
}

/* The stamp symbol_by_id holds for `id`; 0 if it holds none. */
static __always_inline u64 symbol_stamp(s32 id) {
  struct pyperf_symbol_slot *slot = symbol_by_id.lookup(&id);
  return slot ? slot->stamp : 0;
}

/* What interning a code object found out, for its code_symbols entries. */
struct interned_code {
  u64 name, file;             /* the string objects read */
  u64 name_print, file_print; /* their texts (0: not checkable) */
  u64 class_key;              /* the class the symbol names (0: none) */
  u64 class_print;
  u64 stamp; /* of the id in symbol_by_id (0: unknown) */
  u8 arg_kind;
};

/* Interns the frame's code object as a symbol id (the symbols map: its file,
 * name, class and first line -> id); PYPERF_SYMBOL_LOST when the map is full. */
static __always_inline s32 intern_symbol(struct pyperf_sample_state *state, struct pyperf_offsets *o,
                                         u64 code, u64 frame, struct interned_code *seen) {
  struct pyperf_symbol *sym = &state->slot.symbol;
  __builtin_memset(sym, 0, sizeof(*sym));
  seen->file = read_ptr(code + o->code_filename);
  /* A string the symbol could not hold (unreadable) is never remembered: it
   * may read the next time. */
  s64 hash = read_py_text(o, seen->file, sym->file, sizeof(sym->file), &sym->file_text, 0);
  if (sym->file_text.encoding != PYPERF_TEXT_UNREADABLE)
    seen->file_print = text_print(hash, &sym->file_text, (u8 *)sym->file, sizeof(sym->file));
  seen->name = read_ptr(code + o->code_name);
  hash = read_py_text(o, seen->name, sym->function, sizeof(sym->function), &sym->function_text, 0);
  if (sym->function_text.encoding != PYPERF_TEXT_UNREADABLE)
    seen->name_print =
        text_print(hash, &sym->function_text, (u8 *)sym->function, sizeof(sym->function));
  seen->arg_kind = code_arg_kind(o, code);
  if (seen->arg_kind != PYPERF_ARG_NONE) {
    seen->class_key = frame_class(state, o, frame, seen->arg_kind);
    if (seen->class_key) {
      read_class_text(seen->class_key, o, sym->class_name, &sym->class_text);
      if (sym->class_text.encoding != PYPERF_TEXT_UNREADABLE)
        seen->class_print = text_print(-1, &sym->class_text, (u8 *)sym->class_name,
                                       sizeof(sym->class_name));
    }
  }
  sym->first_line = read_s32(code + o->code_firstlineno);

  s32 *existing = symbols.lookup(sym);
  if (existing) {
    s32 id = *existing;
    seen->stamp = symbol_stamp(id);
    return id;
  }
  int next_slot = PYPERF_SYMBOL_NEXT_ID, interned_slot = PYPERF_SYMBOL_INTERNED;
  u64 *counter = symbol_counter.lookup(&next_slot);
  u64 *interned = symbol_counter.lookup(&interned_slot);
  if (!counter || !interned) return PYPERF_SYMBOL_LOST;
  /* Ids without atomics: the CPU number above a per-CPU count. */
  s32 id = (s32)(((bpf_get_smp_processor_id() & 0x7f) << 24) | (*counter & 0xffffff));
  *counter += 1;
  if (symbols.insert(sym, &id) != 0) {
    /* Another CPU interned it first, or the map is full. */
    existing = symbols.lookup(sym);
    if (!existing) return PYPERF_SYMBOL_LOST;
    id = *existing;
    seen->stamp = symbol_stamp(id);
    return id;
  }
  /* User space resolves ids through this map; the id is stored before the
   * event that names it is sent. An id still held by another symbol (the
   * count wrapped, or a host of more than 128 CPUs) is never overwritten:
   * the new symbol gives its key back and this frame is lost, not misnamed. */
  state->slot.stamp = bpf_ktime_get_ns() | 1;
  if (symbol_by_id.insert(&id, &state->slot) != 0) {
    symbols.delete(sym);
    return PYPERF_SYMBOL_LOST;
  }
  seen->stamp = state->slot.stamp;
  *interned += 1;
  return id;
}

/* The symbol id of a frame of `code`: from code_symbols when the code object
 * is the one an entry was made for (see PyPerfBpfShared.h), else interned and
 * remembered there. */
static __always_inline s32 code_symbol(struct pyperf_sample_state *state, struct pyperf_offsets *o,
                                       u64 code, u64 frame) {
  struct pyperf_code_key key = {.code = code, .class_key = 0};
  struct pyperf_code_entry *entry = code_symbols.lookup(&key);
  if (entry) {
    struct pyperf_text text = {};
    u64 name = CODE_PTR(state, code, o->code_name);
    u64 file = CODE_PTR(state, code, o->code_filename);
    s32 first_line = CODE_S32(state, code, o->code_firstlineno);
    int same = name == entry->name && file == entry->file && first_line == entry->first_line;
    if (same) {
      s64 hash = read_py_text(o, name, (char *)state->text_scratch, PYPERF_FUNCTION_LEN, &text, 1);
      same = text_print(hash, &text, state->text_scratch, PYPERF_FUNCTION_LEN) == entry->name_print;
    }
    if (same && file != state->checked_file) {
      s64 hash = read_py_text(o, file, (char *)state->text_scratch, PYPERF_FILE_LEN, &text, 1);
      state->checked_file = file;
      state->checked_file_print = text_print(hash, &text, state->text_scratch, PYPERF_FILE_LEN);
    }
    if (same) same = state->checked_file_print == entry->file_print;
    if (same && entry->arg_kind == PYPERF_ARG_NONE) {
      if (symbol_stamp(entry->symbol_id) == entry->stamp) {
        state->code_hits++;
        return entry->symbol_id;
      }
    } else if (same) {
      u64 class_key = frame_class(state, o, frame, entry->arg_kind);
      if (class_key) {
        key.class_key = class_key;
        struct pyperf_code_entry *by_class = code_symbols.lookup(&key);
        /* Made for the code object the first entry is for, not one that had
         * its address before. */
        if (by_class && by_class->name == entry->name && by_class->file == entry->file &&
            by_class->name_print == entry->name_print &&
            by_class->file_print == entry->file_print &&
            by_class->first_line == entry->first_line) {
          read_class_text(class_key, o, (char *)state->text_scratch, &text);
          if (text_print(-1, &text, state->text_scratch, PYPERF_CLASS_LEN) ==
                  by_class->class_print &&
              symbol_stamp(by_class->symbol_id) == by_class->stamp) {
            state->code_hits++;
            return by_class->symbol_id;
          }
        }
      }
    }
  }

  state->code_misses++;
  struct interned_code seen = {};
  s32 id = intern_symbol(state, o, code, frame, &seen);
  if (id < 0 || seen.stamp == 0 || seen.name_print == 0 || seen.file_print == 0) return id;
  struct pyperf_code_entry fresh = {};
  fresh.name = seen.name;
  fresh.file = seen.file;
  fresh.name_print = seen.name_print;
  fresh.file_print = seen.file_print;
  fresh.first_line = state->slot.symbol.first_line;
  fresh.arg_kind = seen.arg_kind;
  if (seen.arg_kind == PYPERF_ARG_NONE) {
    fresh.symbol_id = id;
    fresh.stamp = seen.stamp;
  }
  key.class_key = 0;
  code_symbols.update(&key, &fresh);
  if (seen.arg_kind != PYPERF_ARG_NONE && seen.class_key && seen.class_print) {
    fresh.class_print = seen.class_print;
    fresh.symbol_id = id;
    fresh.stamp = seen.stamp;
    key.class_key = seen.class_key;
    code_symbols.update(&key, &fresh);
  }
  return id;
}
