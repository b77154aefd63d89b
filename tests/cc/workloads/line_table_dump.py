"""Prints the line tables of real code objects and the line the interpreter
itself gives for every instruction offset, for tests/cc/test_line_tables.cc.

Output, one record a line:
  code NAME FIRSTLINENO HEX       the table PyPerf reads: co_lnotab up to 3.9,
                                  co_linetable from 3.10
  at BYTE_OFFSET LINE             LINE is "-" where the interpreter has none
The line comes from the interpreter's own API: co_positions() (3.11+),
co_lines() (3.10), dis.findlinestarts() (older).
Written for Python 2.7 and 3.x alike.
"""
import binascii
import dis
import sys

SOURCE = '''
def straight(a, b):
    c = a + b
    return c


def loop(n):
    total = 0
    while n > 0:
        total += n
        n -= 1
    for i in range(3):
        total += i
    return total


def far_apart(x):
    y = x
''' + '\n' * 300 + '''
    y += 1
''' + '\n' * 40 + '''
    return y


def long_body(x):
''' + ''.join('    x = x * %d + %d\n' % (i, i) for i in range(200)) + '''
    return x


def wide_columns(x):
    return (x + 1, ''' + ' ' * 150 + '''x + 2,
            x + 3)


def multi_line_call(f):
    return f(1,
             2,

             3)


def decorated(f):
    return f


@decorated
def with_decorator():
    try:
        raise ValueError()
    except ValueError:
        return [i * 2 for i in range(4) if i]
'''


def table(code):
    if sys.version_info >= (3, 10):
        return code.co_linetable
    return code.co_lnotab


def lines_by_offset(code):
    """byte offset -> line (None where the interpreter has no line)."""
    size = len(code.co_code)
    if sys.version_info >= (3, 11):
        out = {}
        for unit, position in enumerate(code.co_positions()):
            out[2 * unit] = position[0]
        return out
    if sys.version_info >= (3, 10):
        out = {}
        for start, end, line in code.co_lines():
            for offset in range(start, end):
                out[offset] = line
        return out
    starts = list(dis.findlinestarts(code))
    out = {}
    for offset in range(size):
        line = None
        for start, start_line in starts:
            if start <= offset:
                line = start_line
        out[offset] = line
    return out


def walk(code, out):
    hex_table = binascii.hexlify(table(code))
    if not isinstance(hex_table, str):
        hex_table = hex_table.decode("ascii")
    out.append("code %s %d %s" % (code.co_name.replace(" ", "_"), code.co_firstlineno,
                                  hex_table or "-"))
    for offset, line in sorted(lines_by_offset(code).items()):
        out.append("at %d %s" % (offset, "-" if line is None else line))
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            walk(const, out)


def main():
    out = []
    walk(compile(SOURCE, "line_tables.py", "exec"), out)
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
