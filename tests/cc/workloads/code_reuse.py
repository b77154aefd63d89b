"""Code objects freed and made again at the same addresses, for
test_e2e_code_reuse.cc (issue 35).

Generation N execs a fresh module: outer_III calls inner_III, which spins,
then calls the classmethod make and the method spin, which spin too, first on
the subclass L_III, then on K_III, which defines them (so one code object runs
for two classes, the first of which may be a new one at an old one's address),
compiled under the file name generated_FFF.py, with L blank lines before
the definitions. Each generation changes exactly one of the three from the one
before, in turn (see identity()): its names and class (III), its file name
(FFF), or its first lines (L), so each of them alone is what tells two
consecutive generations apart, as a profiler's check on a reused address must.
Every name and file name is as long as every other's. Once a generation has
run, every reference to it goes and gc.collect() frees it, so the next
generation's code objects, name strings and class land where this one's were
(CPython's allocators hand back the block freed last): a profiler that names a
frame from what it read at the same address before names the wrong
generation. The main thread's name (comm) is "gen_NNNNNN" while generation N
runs, so each sample also says which generation it was taken in, from outside
the code objects.

Usage: code_reuse.py CPU_SECONDS
Prints "lines outer=A inner=B make=C spin=D class=E period=P" (each code
object's co_firstlineno at generation 0; generation N's are L more, L as
identity() says, checked on every generation), then "ready"; waits for SIGUSR1; runs
generations until the process has used CPU_SECONDS of CPU time since; prints
"done generations=G code_reused=C type_reused=T name_reused=S
code_name_line_reused=L" (how many generations had a code object at an
address one of an earlier generation's had; a class at an earlier class's
address; a code object's name string at an earlier name's address; a code
object whose address, name address and first line were all an earlier one's);
then sleeps until killed. Python 2.7 and 3.x.
"""
import gc
import os
import signal
import sys
import time

GENERATED_FILE = "/code_reuse/generated_%06d.py"
LINE_PERIOD = 5
# Iterations of each of the three spins of a generation: a few ms in all.
SPIN_ITERATIONS = 20000

# Line 1 is a statement, so the module's own first line is 1 in every version.
HEADER = "GENERATION = %(n)d\n"
BODY = """
def outer_%(n)06d(iterations):
    return inner_%(n)06d(iterations)


def inner_%(n)06d(iterations):
    i = 0
    while i < iterations:
        i += 1
    sub = L_%(n)06d.make(iterations)
    sub.spin(iterations)
    made = K_%(n)06d.make(iterations)
    return made.spin(iterations)


class K_%(n)06d(object):
    def make(cls, iterations):
        i = 0
        while i < iterations:
            i += 1
        return cls()
    make = classmethod(make)

    def spin(self, iterations):
        i = 0
        while i < iterations:
            i += 1
        return i


class L_%(n)06d(K_%(n)06d):
    pass
"""

# The code objects whose names carry the generation.
KINDS = ("outer", "inner", "make", "spin", "class", "subclass")


def identity(n):
    """Generation n's (name number, file number, blank lines): from n - 1,
    n % 3 == 1 changes the names, n % 3 == 2 the file, n % 3 == 0 the lines
    (test_e2e_code_reuse.cc computes the same)."""
    k, r = n // 3, n % 3
    return k + (r >= 1), k + (r >= 2), k % LINE_PERIOD


def cpu_seconds_used():
    times = os.times()
    return times[0] + times[1]


def code_objects(n, module_code, namespace):
    """The generation's code objects by kind (n: its name number)."""
    klass = namespace["K_%06d" % n]

    def body(name):
        return [c for c in module_code.co_consts if getattr(c, "co_name", None) == name][0]
    return {
        "outer": namespace["outer_%06d" % n].__code__,
        "inner": namespace["inner_%06d" % n].__code__,
        "make": klass.__dict__["make"].__func__.__code__,
        "spin": klass.__dict__["spin"].__code__,
        "class": body("K_%06d" % n),
        "subclass": body("L_%06d" % n),
    }


def name_thread(n):
    # /proc/self/comm is the main thread's, which runs the generations. Bytes
    # and a binary file, so that no library Python code (a codec or locale
    # lookup) runs: every frame of a generation's samples is of this file or
    # the generated one.
    comm = open("/proc/self/comm", "wb")
    try:
        comm.write(b"gen_%06d" % n)
    finally:
        comm.close()


def run_generation(n, first_lines):
    """Makes and runs generation n; returns what identifies its objects:
    (code id, name id, first line) per code object, and the class's id."""
    name_thread(n)
    names, file_number, blank_lines = identity(n)
    source = HEADER % {"n": n} + "\n" * blank_lines + BODY % {"n": names}
    module_code = compile(source, GENERATED_FILE % file_number, "exec")
    namespace = {"__name__": "generated"}
    exec(module_code, namespace)
    codes = code_objects(names, module_code, namespace)
    for kind in KINDS:
        expected = first_lines[kind] + blank_lines
        if codes[kind].co_firstlineno != expected:
            raise AssertionError("%s of generation %d starts on line %d, not %d"
                                 % (kind, n, codes[kind].co_firstlineno, expected))
    namespace["outer_%06d" % names](SPIN_ITERATIONS)
    objects = [(id(c), id(c.co_name), c.co_firstlineno) for c in codes.values()]
    # What a check on a reused address sees of each code object.
    seen = dict((kind, (id(c), id(c.co_name), id(c.co_filename), c.co_firstlineno))
                for kind, c in codes.items())
    class_id = id(namespace["K_%06d" % names])
    return objects, seen, class_id


def generation_zero_first_lines():
    source = HEADER % {"n": 0} + BODY % {"n": 0}
    module_code = compile(source, GENERATED_FILE % 0, "exec")
    namespace = {"__name__": "generated"}
    exec(module_code, namespace)
    codes = code_objects(0, module_code, namespace)
    return dict((kind, codes[kind].co_firstlineno) for kind in KINDS)


def run_generations(cpu_seconds, first_lines):
    code_ids, name_ids, code_name_lines, class_ids = set(), set(), set(), set()
    counts = dict.fromkeys(["code_reused", "type_reused", "name_reused",
                            "code_name_line_reused", "same_pointers_names_changed",
                            "same_pointers_file_changed", "same_pointers_lines_changed"], 0)
    changed = {1: "names", 2: "file", 0: "lines"}
    start = cpu_seconds_used()
    n = 0
    seen_before = {}
    while cpu_seconds_used() - start < cpu_seconds:
        objects, seen, class_id = run_generation(n, first_lines)
        gc.collect()
        # A code object at the address of the generation before's of its kind,
        # with its name and file name at their addresses too (and, where the
        # lines did not change, its first line): only the text of what changed
        # tells the two apart.
        if n > 0 and any(seen[k][:3] == seen_before[k][:3] for k in seen):
            counts["same_pointers_%s_changed" % changed[n % 3]] += 1
        seen_before = seen
        # Every earlier generation's objects are gone by now, so an id seen
        # before is an address reused by a different object.
        counts["code_reused"] += any(c in code_ids for c, _, _ in objects)
        counts["name_reused"] += any(name in name_ids for _, name, _ in objects)
        counts["code_name_line_reused"] += any(i in code_name_lines for i in objects)
        counts["type_reused"] += class_id in class_ids
        code_ids.update(c for c, _, _ in objects)
        name_ids.update(name for _, name, _ in objects)
        code_name_lines.update(objects)
        class_ids.add(class_id)
        n += 1
    return n, counts


released = []


def release(signum, frame):
    released.append(signum)


def main():
    cpu_seconds = float(sys.argv[1])
    first_lines = generation_zero_first_lines()
    gc.collect()
    sys.stdout.write("lines %s period=%d\n"
                     % (" ".join("%s=%d" % (k, first_lines[k]) for k in KINDS), LINE_PERIOD))
    signal.signal(signal.SIGUSR1, release)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while not released:
        time.sleep(0.02)
    generations, counts = run_generations(cpu_seconds, first_lines)
    sys.stdout.write("done generations=%d %s\n"
                     % (generations, " ".join("%s=%d" % (k, counts[k]) for k in sorted(counts))))
    sys.stdout.flush()
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
