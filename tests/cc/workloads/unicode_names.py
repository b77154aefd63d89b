# -*- coding: utf-8 -*-
"""Names in every CPython string kind, for PyPerf's end-to-end tests
(tests/cc/test_e2e_versions.cc, NamesAreExactUtf8).

Usage: python unicode_names.py BASE_DIR     (BASE_DIR: an ASCII path)

Writes four source files under BASE_DIR, their paths in three string kinds:
  BASE_DIR/josé/größe.py               Latin-1
  BASE_DIR/计算/模块.py                  BMP (UCS-2)
  BASE_DIR/🐍/snake_𠀀.py               astral (UCS-4)
  BASE_DIR/ö*100/ö*100/ö*100/long.py   longer than PyPerf's 256-byte buffer
and runs, in the main thread, this call chain forever (root first; the
line is co_firstlineno):
  größe                    josé/größe.py:1    Latin-1 function
  Größe计算.计算             计算/模块.py:2       BMP class and method
  𠀀𠀁                      🐍/snake_𠀀.py:1   astral function
  renamed_🔥_é             🐍/snake_𠀀.py:3   renamed at run time (code.replace, 3.8+)
  odd;name<LF>with<NUL>nul 🐍/snake_𠀀.py:5   renamed: separators and a NUL
  bad<FF><FE>name          long.py:1          2.7 only: bytes that are not UTF-8
  lang_ööö… (75 chars)     long.py:3          longer than the 64-byte buffer
  长长长… (40 chars)         long.py:5          80 bytes in UCS-2
  Klasseäää….spin          long.py:8          class name over 32 bytes; the leaf
The main thread's comm is set to the bytes "n\\xc3\\xa4mes\\xff" (not UTF-8).

Python 2.7 allows only ASCII identifiers: there every name is given to the
code object afterwards, as UTF-8 bytes. Prints "ready" once the leaf runs.
"""
import os
import sys
import types

PY2 = sys.version_info[0] == 2

LATIN1_FUNCTION = u"größe"
BMP_CLASS = u"Größe计算"
BMP_METHOD = u"计算"
ASTRAL_FUNCTION = u"\U00020000\U00020001"
RENAMED = u"renamed_\U0001F525_é"
ODD_NAME = u"odd;name\nwith\x00nul"
LONG_LATIN1 = u"lang_" + u"ö" * 70
LONG_BMP = u"长" * 40
LONG_CLASS = u"Klasse" + u"ä" * 30
BAD_BYTES = b"bad\xff\xfename"


def native(text):
    """A name as the interpreter keeps it: UTF-8 bytes on 2.7, str after."""
    return text.encode("utf-8") if PY2 else text


def rename(function, name):
    """Gives function's code object the name `name`, at run time."""
    code = function.__code__
    if hasattr(code, "replace"):  # 3.8+
        function.__code__ = code.replace(co_name=name)
        return
    args = [code.co_argcount]
    if not PY2:
        args.append(code.co_kwonlyargcount)
    args += [code.co_nlocals, code.co_stacksize, code.co_flags, code.co_code, code.co_consts,
             code.co_names, code.co_varnames, code.co_filename, name, code.co_firstlineno,
             code.co_lnotab, code.co_freevars, code.co_cellvars]
    function.__code__ = types.CodeType(*args)


def load(path, source):
    """Writes `source` to `path` (the file system sees UTF-8 bytes, whatever
    the locale) and runs it as its module; returns the module's globals."""
    directory = os.path.dirname(path).encode("utf-8")
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with open(path.encode("utf-8"), "wb") as f:
        f.write(source.encode("utf-8"))
    namespace = {"__name__": "names"}
    code = compile(source.encode("utf-8") if PY2 else source, native(path), "exec")
    exec(code, namespace)
    return namespace


def ready():
    sys.stdout.write("ready\n")
    sys.stdout.flush()


def build(base):
    """Defines the chain; returns its root."""
    if PY2:
        a = load(os.path.join(base, u"josé", u"größe.py"),
                 u"def latin1():\n    return NEXT()\n")
        first = a["latin1"]
        rename(first, native(LATIN1_FUNCTION))
        b = load(os.path.join(base, u"计算", u"模块.py"),
                 u"class Placeholder(object):\n    def method(self):\n        return NEXT()\n")
        method = b["Placeholder"].__dict__["method"]
        rename(method, native(BMP_METHOD))
        bmp = type(native(BMP_CLASS), (object,), {"method": method})().method
    else:
        a = load(os.path.join(base, u"josé", u"größe.py"),
                 u"def %s():\n    return NEXT()\n" % LATIN1_FUNCTION)
        first = a[LATIN1_FUNCTION]
        b = load(os.path.join(base, u"计算", u"模块.py"),
                 u"class %s:\n    def %s(self):\n        return NEXT()\n" % (BMP_CLASS, BMP_METHOD))
        bmp = getattr(b[BMP_CLASS](), BMP_METHOD)

    c = load(os.path.join(base, u"\U0001F40D", u"snake_\U00020000.py"),
             u"def %s():\n    return NEXT_ASTRAL()\n"
             u"def to_rename():\n    return NEXT_RENAMED()\n"
             u"def odd():\n    return NEXT_ODD()\n" % (u"astral" if PY2 else ASTRAL_FUNCTION))
    astral = c[u"astral" if PY2 else ASTRAL_FUNCTION]
    if PY2:
        rename(astral, native(ASTRAL_FUNCTION))
    rename(c["to_rename"], native(RENAMED))
    rename(c["odd"], native(ODD_NAME))

    d = load(os.path.join(base, u"ö" * 100, u"ö" * 100, u"ö" * 100, u"long.py"),
             u"def bad():\n    return NEXT_BAD()\n"
             u"def long_latin1():\n    return NEXT_LATIN1()\n"
             u"def long_bmp():\n    return NEXT_BMP()\n"
             u"class Long(object):\n"
             u"    def spin(self):\n"
             u"        READY()\n"
             u"        while True:\n"
             u"            x = 0\n"
             u"            for i in range(10000):\n"
             u"                x += i\n")
    rename(d["bad"], BAD_BYTES if PY2 else u"bad")
    rename(d["long_latin1"], native(LONG_LATIN1))
    rename(d["long_bmp"], native(LONG_BMP))
    leaf = type(native(LONG_CLASS), (object,), {"spin": d["Long"].__dict__["spin"]})().spin

    # Each link calls the next through its module's globals: no frame between.
    a["NEXT"] = bmp
    b["NEXT"] = astral
    c["NEXT_ASTRAL"] = c["to_rename"]
    c["NEXT_RENAMED"] = c["odd"]
    c["NEXT_ODD"] = d["bad"] if PY2 else d["long_latin1"]
    d["NEXT_BAD"] = d["long_latin1"]
    d["NEXT_LATIN1"] = d["long_bmp"]
    d["NEXT_BMP"] = leaf
    d["READY"] = ready
    return first


def main():
    base = sys.argv[1]
    if PY2:
        base = base.decode("utf-8")
    try:
        with open("/proc/self/comm", "wb") as f:
            f.write(b"n\xc3\xa4mes\xff")
    except (IOError, OSError):
        pass
    build(base)()


if __name__ == "__main__":
    main()
