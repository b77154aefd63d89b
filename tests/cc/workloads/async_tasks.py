"""An asyncio service of nested tasks, for PyPerf's --async-tasks tests
(test_e2e_async_tasks.cc): CPython 3.14+ (TaskGroup, asyncio task state).

main (Task-1) starts one named task per "request"; each request's handler
opens a TaskGroup with two named stages; each stage gathers two coroutines,
which asyncio wraps in tasks of its own default names ("Task-<n>"). The
gathered coroutines spin the CPU for a known time per step, one of them a
level deeper (deeper -> spin_steps), then yield to the loop:

  Task-1 (main)
    request-<i> (handle)
      request-<i>-parse (stage)   gathers spin_steps(1 ms), deeper(2 ms)
      request-<i>-render (stage)  gathers spin_steps(2 ms), deeper(4 ms)

A last request, "deep", awaits a chain of 10 tasks (nest-9 ... nest-0,
each awaiting the next), deeper than PyPerf's 8 tasks a sample: its samples
carry [Task Chain Too Deep]. Every task lives until the process is killed, so the tree that
`python3 -m asyncio pstree PID` prints stays the same. One request is named
in a non-ASCII script ("requête-1") to show names are bytes, not ASCII.
Prints "ready" once every task exists.
"""
import asyncio
import sys
import time

REQUESTS = ["request-0", "requ\u00eate-1"]


def spin(ms):
    end = time.process_time() + ms / 1000.0
    while time.process_time() < end:
        pass


async def spin_steps(ms):
    while True:
        spin(ms)
        await asyncio.sleep(0)


async def deeper(ms):
    await spin_steps(ms)


async def stage(ms):
    await asyncio.gather(spin_steps(ms), deeper(2 * ms))


async def handle(request):
    async with asyncio.TaskGroup() as group:
        group.create_task(stage(1), name=request + "-parse")
        group.create_task(stage(2), name=request + "-render")


async def nest(level):
    if level == 0:
        await spin_steps(1)
    else:
        await asyncio.create_task(nest(level - 1), name="nest-%d" % (level - 1))


async def announce():
    await asyncio.sleep(0.2)
    sys.stdout.write("ready\n")
    sys.stdout.flush()


async def main():
    requests = [asyncio.create_task(handle(name), name=name) for name in REQUESTS]
    requests.append(asyncio.create_task(nest(10), name="deep"))
    await asyncio.gather(announce(), *requests)


asyncio.run(main())
