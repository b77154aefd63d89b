"""A process that corrupts its own Python frame chain, for PyPerf's hostile-process
tests. outer() calls middle() calls spin(); spin() then rewrites one frame's
link to its caller (PyFrameObject.f_back up to 3.10, _PyInterpreterFrame's
`previous` from 3.11) through ctypes, prints "ready" and spins forever without
returning, so CPython itself never follows the bad link.

  python corrupt_frames.py self      middle's caller link points at middle
  python corrupt_frames.py loop      outer's caller link points at spin
  python corrupt_frames.py unmapped  middle's caller link points at a page
                                     that was mapped and unmapped again
  python corrupt_frames.py deep N    no corruption: recursion N frames deep
                                     (on a thread with a 256 MiB stack, as
                                     each frame costs C stack up to 3.10),
                                     spinning at the bottom

The frame layouts are those of CPython's own headers (Include/frameobject.h,
Include/internal/pycore_frame.h); test_py_offsets checks PyPerf's copy of
them, this file needs only the caller link."""
import ctypes
import sys

PTR = ctypes.sizeof(ctypes.c_void_p)


def frame_link_address(frame):
    """The address of the word holding `frame`'s caller link."""
    if sys.version_info < (3, 11):
        # PyObject_VAR_HEAD (refcount, type, size), then f_back.
        return id(frame) + 3 * PTR
    # PyFrameObject: PyObject_HEAD, f_back, then f_frame -> _PyInterpreterFrame.
    interpreter_frame = ctypes.c_void_p.from_address(id(frame) + 3 * PTR).value
    if sys.version_info < (3, 12):
        # f_func, f_globals, f_builtins, f_locals, f_code, frame_obj, previous
        return interpreter_frame + 6 * PTR
    # f_code / f_executable, previous
    return interpreter_frame + 1 * PTR


def frame_address(frame):
    """What a caller link holds to point at `frame`."""
    if sys.version_info < (3, 11):
        return id(frame)
    return ctypes.c_void_p.from_address(id(frame) + 3 * PTR).value


def unmapped_address():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    prot_read, map_private, map_anonymous = 1, 2, 0x20
    page = libc.mmap(None, 4096, prot_read, map_private | map_anonymous, -1, 0)
    if page is None or page == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap")
    if libc.munmap(page, 4096) != 0:
        raise OSError(ctypes.get_errno(), "munmap")
    return page


def write_link(frame, value):
    ctypes.c_size_t.from_address(frame_link_address(frame)).value = value


def spin(mode):
    me = sys._getframe()
    middle_frame = sys._getframe(1)
    outer_frame = sys._getframe(2)
    if mode == "self":
        write_link(middle_frame, frame_address(middle_frame))
    elif mode == "loop":
        write_link(outer_frame, frame_address(me))
    elif mode == "unmapped":
        write_link(middle_frame, unmapped_address())
    del me, middle_frame, outer_frame
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    x = 0
    while True:
        x = (x + 1) & 0xFF


def middle(mode):
    spin(mode)


def outer(mode):
    middle(mode)


def deep(n):
    if n > 1:
        deep(n - 1)
    else:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        x = 0
        while True:
            x = (x + 1) & 0xFF


if __name__ == "__main__":
    if sys.argv[1] == "deep":
        import threading
        sys.setrecursionlimit(int(sys.argv[2]) + 100)
        threading.stack_size(256 << 20)
        t = threading.Thread(target=deep, args=(int(sys.argv[2]),))
        t.start()
        t.join()
    else:
        outer(sys.argv[1])
